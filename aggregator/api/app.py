"""The FastAPI application: routers and their scopes, the error handlers, health and metrics.

Every error leaves in one shape, `{code, message, hint}`: PlumbError by its code, a request
that fails validation or does not parse as 400, Starlette's own refusals (unknown route,
wrong method, unparseable body) by their status, and anything unexpected as 500 `internal`,
logged with its traceback.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException

from plumb.aggregator import __version__
from plumb.aggregator.api import (
    baselines,
    benchmarks,
    bundles,
    changes,
    drift,
    nodes,
    recipes,
    validations,
)
from plumb.aggregator.api.access import Access, ReadAccess, SignInNeeded, TrustedProxies
from plumb.aggregator.api.limits import BodyLimit
from plumb.aggregator.core import Core
from plumb.aggregator.errors import STATUS, PlumbError, RateLimited, Unauthenticated
from plumb.aggregator.web import routes as web

log = logging.getLogger(__name__)

# Starlette's own refusals, as the codes of errors.STATUS.
_HTTP_CODES = {
    400: "invalid_input",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "invalid_input",
    413: "too_large",
    429: "rate_limited",
    503: "unavailable",
}


def _problem(status: int, code: str, message: str, hint: str | None, **headers: str):
    return JSONResponse(
        status_code=status,
        content={"code": code, "message": message, "hint": hint},
        headers=headers or None,
    )


def create_app(core: Core) -> FastAPI:
    """The HTTP API over `core`; OpenAPI at /docs."""
    app = FastAPI(
        title="Plumb",
        version=__version__,
        description="Live GPU software stack facts of a Kubernetes cluster.",
    )
    app.state.core = core
    app.state.access = Access(core.settings.api)
    app.add_middleware(BodyLimit, max_bytes=core.settings.http_max_body_bytes)
    if core.settings.api.trusted_proxies:
        app.add_middleware(TrustedProxies, trusted=core.settings.api.trusted_proxies)
    # Every route needs the read scope; the routes that change state add AdminAccess. The web
    # router sets its own per route: pages send a browser to /login, which is open.
    for router in (
        nodes.router,
        bundles.router,
        recipes.router,
        drift.router,
        changes.router,
        validations.router,
        benchmarks.router,
        baselines.router,
    ):
        app.include_router(router, dependencies=[ReadAccess])
    app.include_router(web.router)

    @app.exception_handler(SignInNeeded)
    async def sign_in(_: Request, exc: SignInNeeded) -> RedirectResponse:
        return RedirectResponse(f"/login?next={quote(exc.path, safe='/')}", status_code=303)

    @app.exception_handler(PlumbError)
    async def plumb_error(_: Request, exc: PlumbError) -> JSONResponse:
        headers = {}
        if isinstance(exc, Unauthenticated):
            headers["WWW-Authenticate"] = 'Bearer realm="plumb"'
        if isinstance(exc, RateLimited):
            headers["Retry-After"] = str(exc.retry_after_s)
        return _problem(STATUS[exc.code][0], exc.code, str(exc), exc.hint, **headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return _problem(400, "invalid_input", problems, "see /docs")

    @app.exception_handler(HTTPException)
    async def refused(_: Request, exc: HTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(
            exc.status_code, "internal" if exc.status_code >= 500 else "invalid_input"
        )
        return _problem(exc.status_code, code, str(exc.detail), "see /docs", **(exc.headers or {}))

    @app.exception_handler(Exception)
    async def fault(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "request failed",
            exc_info=exc,
            extra={"method": request.method, "path": request.url.path},
        )
        return _problem(500, "internal", "internal error", "the aggregator's log has the cause")

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """The process is alive."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> JSONResponse:
        """Ready to serve: 503 with the failing dependency while degraded."""
        checks = await core.readiness()
        ready = all(checks.values())
        return JSONResponse(
            status_code=200 if ready else 503,
            content={
                "status": "ok" if ready else "degraded",
                "checks": checks,
                "replica": core.replica(),
            },
        )

    # Public for Prometheus unless PLUMB_API__PUBLIC_METRICS=false.
    metrics_access = [] if core.settings.api.public_metrics else [ReadAccess]

    @app.get("/metrics", tags=["health"], include_in_schema=False, dependencies=metrics_access)
    async def metrics() -> Response:
        return Response(core.metrics_page(), media_type=CONTENT_TYPE_LATEST)

    return app
