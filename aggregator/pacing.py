"""Bulk work on the event loop in turns, with the loop left free after each while streams
arrive.

grpc.aio hands the servicer a new stream only after a few steps of the event loop, one
stream at a time; a step that runs a piece of bulk work lasts as long as the piece. With a
3 ms piece in every step, a server took 60 new streams a second (1,460 with no bulk work);
with the loop free for 1 ms after each piece, 537; for 3 ms, 996 (`bench/grpc_accept.py`).
A cold start's syncs (parsing, hashing and evaluating ~370 facts each) ran back to back, so
agents' Hellos waited in gRPC's queue past their Welcome timeout, and their retries added to
the load.

So while streams arrive (one did within ARRIVING_S), bulk work holds at most `duty` of the
loop; once they stop, it runs back to back, still one piece a step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

__all__ = ["ARRIVING_S", "Pacer"]

# Streams count as arriving this long after the last one: gRPC hands them over a few loop
# steps apart, milliseconds even when its queue is long, so a second of none means none wait.
ARRIVING_S = 1.0


class Pacer:
    """One piece of bulk work at a time; while streams arrive, after a piece that took `d`
    seconds the next waits `d * (1 - duty) / duty`."""

    def __init__(self, duty: float, clock: Callable[[], float] = time.perf_counter):
        if not 0 < duty <= 1:
            raise ValueError(f"duty must be in (0, 1], not {duty}")
        self._rest = (1 - duty) / duty
        self._clock = clock
        self._lock = asyncio.Lock()
        self._free_at = 0.0  # loop time before which the next piece does not start
        self._arrived_at = float("-inf")  # loop time a stream last arrived

    def arrived(self) -> None:
        """A new stream arrived: others may be waiting in gRPC's queue behind it."""
        self._arrived_at = asyncio.get_running_loop().time()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this piece's turn; the body is the piece."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            # Even with no rest due, one step of the loop: a lock free to take does not yield.
            await asyncio.sleep(max(0.0, self._free_at - loop.time()))
            start = self._clock()
            try:
                yield
            finally:
                now = loop.time()
                arriving = now - self._arrived_at < ARRIVING_S
                self._free_at = now + (self._clock() - start) * self._rest if arriving else now
