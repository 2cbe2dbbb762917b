"""X-Request-Id: on every response, in every error body, and on every log line of the request.

Over the real app (open_process on a temporary SQLite file): a sane incoming id is kept, an
insane one (too long, a newline, a space) is replaced; 4xx from Plumb, from validation, from
Starlette and the 413 of the body limit all name the id; an unexpected 500 does too, and its
log line carries it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from plumb.aggregator.api import create_app
from plumb.aggregator.process import open_process
from plumb.aggregator.settings import AggregatorSettings
from plumb.logs import JsonFormatter

GENERATED = re.compile(r"[0-9a-f]{32}")  # uuid4().hex


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator:
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        api={"anonymous_read": True},
        http_max_body_bytes=4096,
    )
    process = await open_process(settings)
    yield create_app(process.core)
    process.store.close()


async def _call(app, method: str, path: str, **kwargs) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.request(method, path, **kwargs)


async def test_a_response_gets_a_fresh_id_when_none_is_given(app):
    first = await _call(app, "GET", "/healthz")
    second = await _call(app, "GET", "/healthz")
    assert GENERATED.fullmatch(first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize("given", ["abc-123", "0af7651916cd43dd8448eb211c80319c", "a.b:c_d"])
async def test_ids_made_of_safe_characters_are_kept(app, given):
    resp = await _call(app, "GET", "/healthz", headers={"X-Request-Id": given})
    assert resp.headers["x-request-id"] == given


@pytest.mark.parametrize("given", ["x" * 129, "two words", "semi;colon", "<script>", ""], ids=repr)
async def test_ids_that_are_too_long_or_unsafe_are_replaced(app, given):
    resp = await _call(app, "GET", "/healthz", headers={"X-Request-Id": given})
    assert GENERATED.fullmatch(resp.headers["x-request-id"])


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("GET", "/v1/nodes/nowhere", {}, 404, "not_found"),  # PlumbError
        ("GET", "/v1/nodes?drifted=perhaps", {}, 400, "invalid_input"),  # validation
        ("GET", "/v1/no-such-route", {}, 404, "not_found"),  # Starlette
        ("PUT", "/v1/recipe", {}, 405, "invalid_input"),  # Starlette
        ("POST", "/v1/recipe", {"content": b"{" * 5000}, 413, "too_large"),  # BodyLimit
    ],
    ids=["plumb", "validation", "route", "method", "body-limit"],
)
async def test_every_error_body_names_the_request_id_of_its_response(
    app, method, path, kwargs, status, code
):
    headers = {"X-Request-Id": "trace-42", "content-type": "application/json"}
    resp = await _call(app, method, path, headers=headers, **kwargs)
    assert resp.status_code == status, resp.text
    assert resp.headers["x-request-id"] == "trace-42"
    body = resp.json()
    assert set(body) == {"code", "message", "hint", "request_id"}
    assert (body["code"], body["request_id"]) == (code, "trace-42")


class _Lines(logging.Handler):
    """Log lines as the aggregator's JSON formatter writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def lines() -> AsyncIterator[_Lines]:
    handler = _Lines()
    root = logging.getLogger("plumb")
    root.addHandler(handler)
    level, root.level = root.level, logging.DEBUG
    yield handler
    root.removeHandler(handler)
    root.level = level


async def test_a_fault_is_a_500_naming_its_id_in_body_header_and_log_line(app, lines, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("the store fell over")

    monkeypatch.setattr(app.state.core, "node_rows", broken)
    resp = await _call(app, "GET", "/v1/nodes", headers={"X-Request-Id": "fault-1"})
    assert resp.status_code == 500
    assert resp.headers["x-request-id"] == "fault-1"
    assert resp.json()["request_id"] == "fault-1" and resp.json()["code"] == "internal"
    (line,) = [e for e in lines.lines if e["message"] == "request failed"]
    assert line["request_id"] == "fault-1" and "the store fell over" in line["exception"]


async def test_log_lines_written_while_serving_a_request_carry_its_id(app, lines):
    # The access check logs a refused token; that line is written inside the request.
    await _call(
        app,
        "GET",
        "/v1/nodes",
        headers={"X-Request-Id": "seen-9", "Authorization": "Bearer not-a-token-we-know"},
    )
    logged = [e for e in lines.lines if e["logger"].startswith("plumb.aggregator.api")]
    assert logged, lines.lines
    assert all(e["request_id"] == "seen-9" for e in logged)
    logging.getLogger("plumb.aggregator").info("after the request")
    assert "request_id" not in lines.lines[-1]
