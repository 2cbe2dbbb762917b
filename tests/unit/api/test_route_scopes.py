"""Every route of the real app, walked from its route table: each one needs a token unless it
is a probe, /metrics, the web page's sign-in or its static files (web pages send a browser
to /login instead of 401), and exactly the routes that change state need the admin scope.

A route added without a scope, or a scope check removed, fails here.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from plumb.aggregator.api import create_app
from plumb.aggregator.process import open_process
from plumb.aggregator.settings import AggregatorSettings

ADMIN, READ = "admin-token-0123456789", "read-token-0123456789"
OPEN = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/metrics/sensors"),
}
# The sign-in form and what it needs: answered without a token, never with the fleet.
SIGN_IN = {
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("GET", "/static/{name}"),
}
PAGES = {("GET", "/"), ("GET", "/nodes/{name}")}
ADMIN_ONLY = {
    ("POST", "/v1/validations"),
    ("POST", "/v1/nodes/{name}/baseline"),
    ("POST", "/v1/nodes/{name}/uncordon"),
    ("POST", "/v1/benchmarks"),
    ("DELETE", "/v1/nodes/{name}"),
}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ops admin {ADMIN}\nci read {READ}\n")
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        api={"tokens_file": tokens, "rate_per_s": 1000, "burst": 1000},
    )
    process = await open_process(settings)
    yield create_app(process.core)
    process.store.close()


def _walk(routes, prefix: str = "") -> list[tuple[str, str]]:
    """(method, path) of every APIRoute, into included routers (kept lazily by FastAPI); paths
    as OpenAPI writes them (`{pool}` for a `{pool:path}` converter)."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found += [(method, prefix + route.path_format) for method in route.methods]
        elif hasattr(route, "original_router"):
            found += _walk(route.original_router.routes, prefix + route.include_context.prefix)
    return found


def _routes(app) -> list[tuple[str, str]]:
    routes = sorted(_walk(app.routes))
    documented = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    assert documented <= set(routes), "the walk missed routes: update _walk"
    return routes


async def _call(app, method: str, path: str, token: str | None) -> httpx.Response:
    url = re.sub(r"\{[^}]+\}", "style.css", path)  # any value reaches the route's checks
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.request(method, url, headers=headers, json={})


async def test_every_route_but_the_probes_and_metrics_needs_a_token(app):
    routes = _routes(app)
    assert len(routes) > 15 and OPEN <= set(routes)
    for method, path in routes:
        resp = await _call(app, method, path, None)
        if (method, path) in OPEN:
            assert resp.status_code == 200, (method, path, resp.text)
            continue
        if (method, path) in SIGN_IN:
            assert resp.status_code != 401 and "data-node" not in resp.text, (method, path)
            continue
        if (method, path) in PAGES:
            assert resp.status_code == 303, (method, path, resp.status_code)
            assert resp.headers["location"].startswith("/login?next=/"), (method, path)
            continue
        assert resp.status_code == 401, (method, path, resp.status_code)
        assert resp.headers["www-authenticate"] == 'Bearer realm="plumb"'
        assert resp.json()["code"] == "unauthenticated" and resp.json()["hint"]
        resp = await _call(app, method, path, "not-a-known-token-at-all")
        assert resp.status_code == 401, (method, path)


async def test_exactly_the_state_changing_routes_need_admin(app):
    needs_admin = set()
    for method, path in sorted(set(_routes(app)) - SIGN_IN):
        resp = await _call(app, method, path, READ)
        assert resp.status_code != 401, (method, path)
        if resp.status_code == 403:
            assert resp.json()["code"] == "forbidden" and "'ci'" in resp.json()["message"]
            needs_admin.add((method, path))
        admin = await _call(app, method, path, ADMIN)
        assert admin.status_code not in (401, 403), (method, path, admin.text)
    assert needs_admin == ADMIN_ONLY


async def test_uncordon_without_a_kubernetes_side_says_so_in_the_error_shape(app):
    # A conflict with how the server runs, not a server fault: retrying cannot help.
    resp = await _call(app, "POST", "/v1/nodes/{name}/uncordon", ADMIN)
    assert resp.status_code == 409
    assert resp.json() == {
        "code": "conflict",
        "message": "this aggregator has no Kubernetes side, so it cordons nothing",
        "hint": "run it in the cluster, or give it PLUMB_AUTH__KUBECONFIG",
        "request_id": resp.headers["x-request-id"],
    }
