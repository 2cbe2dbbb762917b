"""Large responses (the metrics pages, the snapshot) sent in slices, the loop free between.

Starlette's `await send(...)` suspends only while the transport is paused, its buffer over
the high-water mark. A client that reads as fast as the aggregator writes (Prometheus on a
fast network, anything on loopback) never pauses it, so a whole page went out in one step
of the event loop: every agent stream's Ack waited behind 16 MB of /metrics or 87 MB of
/metrics/sensors at 10,000 nodes (bench/README.md, round 35). Here the body yields to the
loop after each slice, so nothing waits for more than one slice's write. `accepts_gzip` reads
whether a request takes the gzip encoding (/metrics keeps its pieces deflated for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

from fastapi.responses import StreamingResponse

__all__ = ["SLICE", "accepts_gzip", "paced", "sliced"]

# What one write sends at most: about what a loopback socket takes at once.
SLICE = 1 << 20


async def sliced(pieces: Iterable[bytes]) -> AsyncIterator[memoryview]:
    """`pieces` in slices of at most SLICE bytes (none empty), yielding to the event loop
    after each; a piece is taken from `pieces` only when the one before is sent."""
    for piece in pieces:
        view = memoryview(piece)
        for i in range(0, len(view), SLICE):
            yield view[i : i + SLICE]
            await asyncio.sleep(0)


def paced(
    pieces: Iterable[bytes],
    media_type: str,
    *,
    length: int | None = None,
    headers: dict[str, str] | None = None,
) -> StreamingResponse:
    """A response of `pieces`, sent as they come (never joined: that would copy the page);
    with Content-Length where `length` is known, and `headers`."""
    headers = dict(headers or {})
    if length is not None:
        headers["Content-Length"] = str(length)
    return StreamingResponse(sliced(pieces), media_type=media_type, headers=headers)


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an Accept-Encoding header (RFC 9110 12.5.3) takes gzip: named, or `*`, with a
    weight above 0."""
    weights: dict[str, float] = {}
    for item in (accept_encoding or "").split(","):
        name, *params = (part.strip() for part in item.split(";"))
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights[name.lower()] = weight
    weight = weights.get("gzip", weights.get("x-gzip", weights.get("*", 0.0)))
    return weight > 0
