"""The FastAPI application: routers and their scopes, the error handlers, health and metrics.

Every error leaves in one shape, `{code, message, hint, request_id}`: PlumbError by its code,
a request that fails validation or does not parse as 400, Starlette's own refusals (unknown
route, wrong method, unparseable body) by their status, and anything unexpected as 500
`internal`, logged with its traceback. `request_id` is the response's `X-Request-Id`
(api/request_id.py), so a caller quoting it leads straight to the server's log lines.
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
    gates,
    index,
    mirror,
    nodes,
    recipes,
    validations,
    whatif,
)
from plumb.aggregator.api.access import Access, ReadAccess, SignInNeeded, TrustedProxies
from plumb.aggregator.api.limits import BodyLimit
from plumb.aggregator.api.paced import accepts_gzip, paced
from plumb.aggregator.api.request_id import HEADER, RequestId, request_id_of
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


def _problem(
    request: Request,
    status: int,
    code: str,
    message: str,
    hint: str | None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The error response; it names its request id in the body and, for the 500s Starlette
    sends from outside the middleware, in the header too."""
    rid = request_id_of(request.scope)
    return JSONResponse(
        status_code=status,
        content={"code": code, "message": message, "hint": hint, "request_id": rid},
        headers={**(headers or {}), **({HEADER: rid} if rid else {})},
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
    app.add_middleware(RequestId)  # added last, so it runs first: even a 413 has an id
    # Every route needs the read scope; the routes that change state add AdminAccess. The web
    # router sets its own per route: pages send a browser to /login, which is open.
    for router in (
        index.router,
        nodes.router,
        bundles.router,
        recipes.router,
        drift.router,
        changes.router,
        gates.router,
        validations.router,
        benchmarks.router,
        whatif.router,
        baselines.router,
        mirror.router,
    ):
        app.include_router(router, dependencies=[ReadAccess])
    app.include_router(web.router)

    @app.exception_handler(SignInNeeded)
    async def sign_in(_: Request, exc: SignInNeeded) -> RedirectResponse:
        return RedirectResponse(f"/login?next={quote(exc.path, safe='/')}", status_code=303)

    @app.exception_handler(PlumbError)
    async def plumb_error(request: Request, exc: PlumbError) -> JSONResponse:
        headers = {}
        if isinstance(exc, Unauthenticated):
            headers["WWW-Authenticate"] = 'Bearer realm="plumb"'
        if isinstance(exc, RateLimited):
            headers["Retry-After"] = str(exc.retry_after_s)
        return _problem(request, STATUS[exc.code][0], exc.code, str(exc), exc.hint, headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return _problem(request, 400, "invalid_input", problems, "see /docs")

    @app.exception_handler(HTTPException)
    async def refused(request: Request, exc: HTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(
            exc.status_code, "internal" if exc.status_code >= 500 else "invalid_input"
        )
        return _problem(request, exc.status_code, code, str(exc.detail), "see /docs", exc.headers)

    @app.exception_handler(Exception)
    async def fault(request: Request, exc: Exception) -> JSONResponse:
        # Starlette calls this outside the middleware, where REQUEST_ID is unset again.
        log.error(
            "request failed",
            exc_info=exc,
            extra={
                "method": request.method,
                "path": request.url.path,
                "request_id": request_id_of(request.scope),
            },
        )
        hint = "the aggregator's log has the cause, under this request_id"
        return _problem(request, 500, "internal", "internal error", hint)

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
    async def metrics(request: Request) -> Response:
        """Prometheus metrics: the aggregator's own and every node's series; gzip-encoded
        where the scrape takes it, as Prometheus's does."""
        headers = {"Vary": "Accept-Encoding"}
        if accepts_gzip(request.headers.get("accept-encoding")):
            pieces = [await core.metrics_page_gzip()]
            headers["Content-Encoding"] = "gzip"
        else:
            pieces = core.metrics_page()
        length = sum(len(p) for p in pieces)
        return paced(pieces, CONTENT_TYPE_LATEST, length=length, headers=headers)

    @app.get(
        "/metrics/sensors", tags=["health"], include_in_schema=False, dependencies=metrics_access
    )
    async def metrics_sensors() -> Response:
        """Prometheus metrics: every streaming node's GPU sensor gauges (labels node, gpu;
        plumb_gpu_info on /metrics joins the rest), for a scrape on its own interval."""

        # Each piece is a few hundred nodes' lines of one family, joined as it is sent: the
        # whole page of a large fleet joined at once would hold the loop. Never gzip: its
        # lines move with every report, and deflating the page at each scrape costs 3x the
        # CPU of sending it over loopback (bench/metrics_gzip.py).
        return paced(core.sensors_page(), CONTENT_TYPE_LATEST)

    return app
