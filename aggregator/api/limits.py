"""HTTP API limits: request bodies (413) and request rates per caller (429).

BodyLimit is an ASGI middleware that answers 413 before an oversized body is read. A declared
Content-Length over the limit is refused at once; any other body is read here as it arrives
(never more than the limit) and refused when it passes the limit, before the route sees any
of it. RateLimiter is the token
bucket aggregator/api/access.py charges each API request to.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["BodyLimit", "RateLimiter"]


class BodyLimit:
    """Refuses HTTP request bodies over `max_bytes` with 413 and the API's error shape."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send)
            return
        # Read the whole body here, at most max_bytes of it: refusing from inside the app
        # would reach FastAPI's body parser, which turns any error into a plain 400.
        chunks: list[bytes] = []
        received = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await self._refuse(scope, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        body = json.dumps(
            {
                "code": "too_large",
                "message": f"request body exceeds {self.max_bytes} bytes",
                "hint": "send a smaller body",
                # Set by api/request_id.py, which runs before this.
                "request_id": scope.get("state", {}).get("request_id"),
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class RateLimiter:
    """A token bucket per caller key: `rate_per_s` sustained, `burst` at once.

    Keys are token names or client addresses; at most `max_keys` buckets are kept, the least
    recently used dropped first (a dropped bucket comes back full), so memory stays bounded.
    """

    def __init__(
        self,
        rate_per_s: float,
        burst: int,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        """Spend one request of `key`'s bucket: 0 if allowed, else seconds until one is."""
        now = self._clock()
        level, then = self._buckets.pop(key, (float(self.burst), now))
        level = min(float(self.burst), level + (now - then) * self.rate_per_s)
        wait = 0.0
        if level >= 1.0:
            level -= 1.0
        else:
            wait = (1.0 - level) / self.rate_per_s
        self._buckets[key] = (level, now)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait
