"""The FastAPI application: routers and their scopes, the one PlumbError handler, health and
metrics."""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from plumb.aggregator import __version__
from plumb.aggregator.api import benchmarks, bundles, drift, nodes, recipes, validations
from plumb.aggregator.api.access import Access, ReadAccess
from plumb.aggregator.api.limits import BodyLimit
from plumb.aggregator.core import Core
from plumb.aggregator.errors import STATUS, PlumbError, RateLimited, Unauthenticated
from plumb.aggregator.web import routes as web


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
    # Every route needs the read scope; the routes that change state add AdminAccess.
    for router in (
        nodes.router,
        bundles.router,
        recipes.router,
        drift.router,
        validations.router,
        benchmarks.router,
        web.router,
    ):
        app.include_router(router, dependencies=[ReadAccess])

    @app.exception_handler(PlumbError)
    async def plumb_error(_: Request, exc: PlumbError) -> JSONResponse:
        headers = {}
        if isinstance(exc, Unauthenticated):
            headers["WWW-Authenticate"] = 'Bearer realm="plumb"'
        if isinstance(exc, RateLimited):
            headers["Retry-After"] = str(exc.retry_after_s)
        return JSONResponse(
            status_code=STATUS[exc.code][0],
            content={"code": exc.code, "message": str(exc), "hint": exc.hint},
            headers=headers,
        )

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return JSONResponse(
            status_code=STATUS["invalid_input"][0],
            content={"code": "invalid_input", "message": problems, "hint": "see /docs"},
        )

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
