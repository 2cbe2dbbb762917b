"""The cyclic collector's policy: keep the long-lived fleet out of its full passes.

A full pass walks every tracked object with the GIL held. With 3,000 nodes in memory one took
0.2-0.36 s, and during a cold start they came every 0.6 s as the heap grew: a fifth of the
aggregator's CPU, and a stall of every stream's Ack and every scrape each time. So after each
full pass the survivors are frozen (`gc.freeze`): what outlived a full pass is the fleet, and
later passes walk only what came since. Frozen objects are still freed by reference counting;
only a cycle among them that dies later waits for the periodic pass, which unfreezes
everything, collects once and freezes again (`gc_full_pass_s`, hourly by default).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

__all__ = ["Heap", "freeze_long_lived"]

log = logging.getLogger(__name__)


def freeze_long_lived() -> None:
    """Take every object now tracked out of the collector's passes (the restored fleet)."""
    gc.freeze()


class Heap:
    """Freezes the survivors of each full pass, and runs the periodic full pass."""

    def __init__(self, full_pass_s: float):
        self._full_pass_s = full_pass_s
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """Until cancelled; the freezing stops with it."""
        self._loop = asyncio.get_running_loop()
        gc.callbacks.append(self._collected)
        try:
            while True:
                await asyncio.sleep(self._full_pass_s)
                self.full_pass()
        finally:
            gc.callbacks.remove(self._collected)

    def full_pass(self) -> int:
        """Collect every object, frozen ones too, and freeze the survivors; the number
        collected."""
        started = time.perf_counter()
        gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        log.info(
            "full garbage collection",
            extra={
                "collected": collected,
                "frozen": gc.get_freeze_count(),
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return collected

    def _collected(self, phase: str, info: dict) -> None:
        # Called by the collector, on whichever thread allocated: freeze on the loop, after.
        loop = self._loop
        if phase == "stop" and info["generation"] == 2 and loop and not loop.is_closed():
            loop.call_soon_threadsafe(gc.freeze)
