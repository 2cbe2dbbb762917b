"""Routes of the web page: full pages, the fragments the page polls, and its two static files.

Thin like the API: each route asks the Core once and hands the API's own JSON (api/models.py)
to `pages`. Only GET:
the page needs read scope and nothing else.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from plumb.aggregator.api.models import ChangeOut, FindingOut, NodeDetailOut, NodeOut
from plumb.aggregator.core import Core
from plumb.aggregator.errors import NotFound
from plumb.aggregator.web import pages

router = APIRouter(include_in_schema=False)

_STATIC = {"style.css": "text/css", "app.js": "text/javascript"}
_HISTORY_LIMIT = 50  # the timeline shows this many recent changes


def _core(request: Request) -> Core:
    return request.app.state.core


CoreDep = Annotated[Core, Depends(_core)]


def _now() -> datetime:
    return datetime.now(UTC)


def _fleet(core: Core, fragment: bool) -> str:
    rows = [NodeOut.of(o).model_dump(mode="json") for o in core.overviews()]
    findings = [FindingOut.of(f).model_dump(mode="json") for f in core.open_findings()]
    return pages.fleet_page(rows, findings, _now(), fragment=fragment)


async def _node(core: Core, name: str, fragment: bool) -> str:
    node = core.node(name)
    detail = NodeDetailOut.of_node(node, core.overview(node)).model_dump(mode="json")
    findings = [FindingOut.of(f).model_dump(mode="json") for f in core.open_findings(node=name)]
    history = [
        ChangeOut.of(h).model_dump(mode="json")
        for h in await core.history(name, limit=_HISTORY_LIMIT)
    ]
    return pages.node_page(detail, findings, history, _now(), fragment=fragment)


@router.get("/", response_class=HTMLResponse)
async def fleet(core: CoreDep) -> str:
    """The fleet overview."""
    return _fleet(core, fragment=False)


@router.get("/ui/fleet", response_class=HTMLResponse)
async def fleet_fragment(core: CoreDep) -> str:
    """The overview's `<main>` content, for the page's live refresh."""
    return _fleet(core, fragment=True)


@router.get("/nodes/{name}", response_class=HTMLResponse)
async def node_page(name: str, core: CoreDep) -> HTMLResponse:
    """One node's page; a plain 404 page for an unknown node."""
    try:
        return HTMLResponse(await _node(core, name, fragment=False))
    except NotFound as exc:
        return HTMLResponse(pages.not_found_page(str(exc), _now()), status_code=404)


@router.get("/ui/nodes/{name}", response_class=HTMLResponse)
async def node_fragment(name: str, core: CoreDep) -> str:
    """The node page's `<main>` content, for the page's live refresh."""
    return await _node(core, name, fragment=True)


@router.get("/static/{name}")
async def static(name: Literal["style.css", "app.js"]) -> Response:
    """The page's stylesheet and script, from package data (no build step)."""
    body = files("plumb.aggregator.web").joinpath("static", name).read_bytes()
    return Response(body, media_type=_STATIC[name], headers={"Cache-Control": "no-cache"})
