"""The cyclic collector's policy: keep the long-lived fleet out of its full passes.

A full pass walks every tracked object with the GIL held. With 3,000 nodes in memory one took
0.2-0.36 s, and during a cold start they came every 0.6 s as the heap grew (6.4 s of passes in
a 22 s ramp), each a stall of every stream's Ack and every scrape. So after each
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
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["freeze_long_lived", "freezing", "full_pass", "run"]

log = logging.getLogger(__name__)


def freeze_long_lived() -> None:
    """Take every object now tracked out of the collector's passes (the restored fleet)."""
    gc.freeze()


@contextmanager
def freezing() -> Iterator[None]:
    """While inside, the survivors of each full pass are frozen as it ends."""
    gc.callbacks.append(_collected)
    try:
        yield
    finally:
        gc.callbacks.remove(_collected)


def full_pass() -> int:
    """Collect every object, frozen ones too, and freeze the survivors; the number collected."""
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


async def run(full_pass_s: float) -> None:
    """Freeze each full pass's survivors, and run `full_pass` every `full_pass_s`, until
    cancelled."""
    with freezing():
        while True:
            await asyncio.sleep(full_pass_s)
            full_pass()


def _collected(phase: str, info: dict) -> None:
    # Called by the collector as a pass ends, on whichever thread allocated, GIL held.
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()
