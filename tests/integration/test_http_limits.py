"""Oversized HTTP bodies get 413 from the real server, and nothing is started or stored."""

from __future__ import annotations

import httpx


def test_an_oversized_body_gets_413_and_nothing_is_started(aggregator):
    before = aggregator.json("/v1/validations")
    body = b'{"phases": ["' + b"x" * (2 << 20) + b'"]}'
    resp = httpx.post(
        aggregator.url + "/v1/validations",
        content=body,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert resp.status_code == 413, resp.text
    assert resp.json()["code"] == "too_large"
    assert aggregator.json("/v1/validations") == before
    assert aggregator.get("/healthz").status_code == 200
