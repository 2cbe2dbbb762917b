"""`POST /v1/query` answers what `GET /v1/query` does, from a JSON body (Plumb's flat fields
or AICR's `{criteria, selector}`); `GET /v1` lists every route with the scope it needs.

Expected values come from recipes/registry.yaml (gpu-operator `version: v26.7.0`) and from the
routes' own declarations in aggregator/api/ (AdminAccess on validations and baselines).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from plumb.aggregator.api import create_app
from plumb.aggregator.process import open_process
from plumb.aggregator.settings import AggregatorSettings


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}", api={"anonymous_read": True}
    )
    process = await open_process(settings)
    transport = httpx.ASGITransport(app=create_app(process.core))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c
    process.store.close()


SELECTOR = "components.gpu-operator.version"


async def test_post_query_with_flat_fields_answers_as_get_does(client):
    params = {"selector": SELECTOR, "service": "eks", "accelerator": "h100"}
    got = (await client.get("/v1/query", params=params)).json()
    posted = await client.post("/v1/query", json=params)
    assert posted.status_code == 200, posted.text
    assert posted.json() == got == {"selector": SELECTOR, "value": "v26.7.0"}


async def test_post_query_takes_aicrs_nested_criteria(client):
    body = {"criteria": {"service": "eks", "accelerator": "h100"}, "selector": SELECTOR}
    resp = await client.post("/v1/query", json=body)
    assert resp.json() == {"selector": SELECTOR, "value": "v26.7.0"}


async def test_post_query_refuses_unknown_fields_and_missing_paths_in_the_error_shape(client):
    resp = await client.post("/v1/query", json={"selector": SELECTOR, "gpu": "h100"})
    assert resp.status_code == 400 and resp.json()["code"] == "invalid_input"
    assert "gpu" in resp.json()["message"]
    resp = await client.post("/v1/query", json={"selector": "components.nope.version"})
    assert resp.status_code == 404 and resp.json()["code"] == "not_found"
    assert resp.json()["request_id"] == resp.headers["x-request-id"]


async def test_post_query_is_no_longer_405(client):
    resp = await client.post("/v1/query", json={"selector": "deployment_order"})
    assert resp.status_code == 200 and "gpu-operator" in resp.json()["value"]


async def test_the_route_index_names_each_routes_method_scope_and_summary(client):
    body = (await client.get("/v1")).json()
    assert body["service"] == "plumb"
    table = {(r["method"], r["path"]): r for r in body["routes"]}
    scopes = {key: r["scope"] for key, r in table.items()}
    assert scopes[("GET", "/healthz")] == "open"
    assert scopes[("GET", "/")] == "page"
    assert scopes[("GET", "/v1/nodes")] == "read"
    assert scopes[("POST", "/v1/query")] == "read"
    assert scopes[("GET", "/v1")] == "read"
    assert scopes[("POST", "/v1/validations")] == "admin"
    assert scopes[("POST", "/v1/nodes/{name}/baseline")] == "admin"
    assert scopes[("DELETE", "/v1/nodes/{name}")] == "admin"
    assert table[("GET", "/healthz")]["summary"] == "The process is alive."
    assert [key for key, r in table.items() if not r["summary"]] == []


async def test_the_route_index_lists_every_documented_route(client):
    body = (await client.get("/v1")).json()
    listed = {(r["method"], r["path"]) for r in body["routes"]}
    spec = (await client.get("/openapi.json")).json()
    documented = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    assert documented <= listed
