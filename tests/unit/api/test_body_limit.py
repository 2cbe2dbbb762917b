"""BodyLimit: bodies over the limit get 413 before the route reads them, declared or chunked."""

from __future__ import annotations

import httpx
from fastapi import FastAPI, Request

from plumb.aggregator.api.limits import BodyLimit

LIMIT = 1024


def _app() -> tuple[FastAPI, list[int]]:
    seen: list[int] = []
    app = FastAPI()
    app.add_middleware(BodyLimit, max_bytes=LIMIT)

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        body = await request.body()
        seen.append(len(body))
        return {"bytes": len(body)}

    return app, seen


async def _post(app: FastAPI, content) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.post("/echo", content=content)


async def test_a_body_at_the_limit_passes():
    app, seen = _app()
    resp = await _post(app, b"x" * LIMIT)
    assert resp.status_code == 200 and seen == [LIMIT]


async def test_a_declared_oversized_body_gets_413_and_the_route_never_runs():
    app, seen = _app()
    resp = await _post(app, b"x" * (LIMIT + 1))
    assert resp.status_code == 413
    assert resp.json()["code"] == "too_large" and str(LIMIT) in resp.json()["message"]
    assert seen == []


async def test_a_chunked_oversized_body_gets_413_and_the_route_never_finishes():
    app, seen = _app()

    async def chunks():
        for _ in range(4):
            yield b"x" * 512

    resp = await _post(app, chunks())
    assert resp.status_code == 413
    assert seen == []
