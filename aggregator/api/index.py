"""`GET /v1`: the API's routes, each with its method, path, the scope it needs and a summary.

What AICR's `GET /` answers, at `/v1` since Plumb's `/` is the web page. The table is read from
the app's own routes, so it cannot drift from what is served: a route's scope is the access
dependency it carries (api/access.py), its summary the first paragraph of its docstring.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.params import Depends
from fastapi.routing import APIRoute
from pydantic import BaseModel

from plumb.aggregator import __version__
from plumb.aggregator.api.access import AdminAccess, PageAccess, ReadAccess

router = APIRouter(prefix="/v1", tags=["meta"])

Scope = Literal["open", "read", "admin", "page"]


class RouteOut(BaseModel):
    """One route: `scope` is what a caller needs (`page`: read, by a web sign-in)."""

    method: str
    path: str
    scope: Scope
    summary: str


class IndexOut(BaseModel):
    service: str
    version: str
    routes: list[RouteOut]


def _scope(dependencies: Iterable[Depends]) -> Scope:
    given = list(dependencies)
    for dep, scope in ((AdminAccess, "admin"), (ReadAccess, "read"), (PageAccess, "page")):
        if any(d is dep for d in given):
            return scope  # type: ignore[return-value]
    return "open"


def _walk(routes: Iterable[Any], prefix: str, deps: list) -> Iterator[RouteOut]:
    """Every APIRoute, into included routers (FastAPI keeps those as they were included)."""
    for route in routes:
        if isinstance(route, APIRoute):
            doc = (route.summary or route.description or "").strip().split("\n\n")[0]
            for method in sorted(route.methods):
                yield RouteOut(
                    method=method,
                    path=prefix + route.path_format,  # `{pool}` for `{pool:path}`
                    scope=_scope([*deps, *route.dependencies]),
                    summary=" ".join(doc.split()),
                )
        elif hasattr(route, "original_router"):
            context = route.include_context
            yield from _walk(
                route.original_router.routes,
                prefix + context.prefix,
                [*deps, *context.dependencies],
            )


@router.get("")
async def index(request: Request) -> IndexOut:
    """Every route of this API: method, path, the scope it needs, and what it does."""
    routes = sorted(_walk(request.app.routes, "", []), key=lambda r: (r.path, r.method))
    return IndexOut(service="plumb", version=__version__, routes=routes)
