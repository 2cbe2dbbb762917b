"""Routes of the web page: full pages, the fragments the page polls, its two static files, and
the sign-in (web/login.py).

Thin like the API: each route asks the Core once and hands the API's own JSON (api/models.py)
to `pages`. Pages and fragments need the read scope and only GET; a page asked for without it
sends the browser to /login, a fragment answers 401 (the script then goes to /login). The
static files and the sign-in are open: the sign-in form needs its stylesheet.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from plumb.aggregator.api.access import PageAccess, ReadAccess, identify, session_of
from plumb.aggregator.api.models import (
    ChangeEventOut,
    ChangeOut,
    FindingOut,
    NodeDetailOut,
)
from plumb.aggregator.api.tokens import Caller
from plumb.aggregator.core import Core
from plumb.aggregator.errors import NotFound, TooLarge, Unavailable
from plumb.aggregator.web import login, pages

router = APIRouter(include_in_schema=False)
router.include_router(login.router)

_STATIC = {"style.css": "text/css", "app.js": "text/javascript"}
_HISTORY_LIMIT = 50  # the timeline shows this many recent changes
_FLEET_EVENTS = 10  # the fleet page shows this many recent change events


def _core(request: Request) -> Core:
    return request.app.state.core


def _account(request: Request, caller: Annotated[Caller | None, Depends(identify)]):
    """Who the page header names: None when anonymous or signed in with a bearer token."""
    session = session_of(request)
    if session is not None:
        return pages.Account(session.caller.name, session.caller.scope, session.csrf)
    if caller is not None and request.headers.get("authorization") is None:
        return pages.Account(caller.name, caller.scope)  # the auth proxy's user
    return None


CoreDep = Annotated[Core, Depends(_core)]
AccountDep = Annotated[pages.Account | None, Depends(_account)]


def _now() -> datetime:
    return datetime.now(UTC)


async def _fleet(core: Core, fragment: bool, account: pages.Account | None = None) -> str:
    now = _now()
    rows = [r.out for r in core.node_rows()]
    findings = [FindingOut.of(f).model_dump(mode="json") for f in core.open_findings()]
    try:
        events = await core.changes(now - timedelta(hours=24), now)
        changes: list[dict] | str = [
            ChangeEventOut.of(c).model_dump(mode="json") for c in events[:_FLEET_EVENTS]
        ]
    except (TooLarge, Unavailable) as exc:
        changes = f"{exc} ({exc.hint})"
    return pages.fleet_page(
        rows, findings, now, changes=changes, fragment=fragment, account=account
    )


async def _node(core: Core, name: str, fragment: bool, account: pages.Account | None = None) -> str:
    node = core.node(name)
    detail = NodeDetailOut.of_node(node, core.overview(node)).model_dump(mode="json")
    findings = [FindingOut.of(f).model_dump(mode="json") for f in core.open_findings(node=name)]
    history = [
        ChangeOut.of(h).model_dump(mode="json")
        for h in await core.history(name, limit=_HISTORY_LIMIT)
    ]
    return pages.node_page(detail, findings, history, _now(), fragment=fragment, account=account)


@router.get("/", response_class=HTMLResponse, dependencies=[PageAccess])
async def fleet(core: CoreDep, account: AccountDep) -> str:
    """The fleet overview."""
    return await _fleet(core, fragment=False, account=account)


@router.get("/ui/fleet", response_class=HTMLResponse, dependencies=[ReadAccess])
async def fleet_fragment(core: CoreDep) -> str:
    """The overview's `<main>` content, for the page's live refresh."""
    return await _fleet(core, fragment=True)


@router.get("/nodes/{name}", response_class=HTMLResponse, dependencies=[PageAccess])
async def node_page(name: str, core: CoreDep, account: AccountDep) -> HTMLResponse:
    """One node's page; a plain 404 page for an unknown node."""
    try:
        return HTMLResponse(await _node(core, name, fragment=False, account=account))
    except NotFound as exc:
        return HTMLResponse(pages.not_found_page(str(exc), _now(), account), status_code=404)


@router.get("/ui/nodes/{name}", response_class=HTMLResponse, dependencies=[ReadAccess])
async def node_fragment(name: str, core: CoreDep) -> str:
    """The node page's `<main>` content, for the page's live refresh."""
    return await _node(core, name, fragment=True)


@router.get("/static/{name}")
async def static(name: Literal["style.css", "app.js"]) -> Response:
    """The page's stylesheet and script, from package data (no build step)."""
    body = files("plumb.aggregator.web").joinpath("static", name).read_bytes()
    return Response(body, media_type=_STATIC[name], headers={"Cache-Control": "no-cache"})
