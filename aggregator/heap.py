"""The cyclic collector's policy: keep the long-lived fleet out of its passes.

A pass walks every object of the generations it collects with the GIL held, each a stall of
every stream's Ack and every scrape. With 3,000 nodes in memory a full pass took 0.2-0.36 s,
and during a cold start they came every 0.6 s as the heap grew. With 10,000 nodes sending
sensor reports, what survived into the oldest generation grew by ~70,000 objects a middle
pass, and a full pass over 345,000 of them took 459 ms (bench/README.md, round 31). So the
survivors of every pass of the middle and oldest generations are frozen (`gc.freeze`) as
it ends: what outlived two passes is the fleet, and later passes walk only what came since.
Frozen objects are still freed by reference counting; only a cycle among them that dies
later waits for the periodic pass, which unfreezes everything, collects once and freezes
again (`gc_full_pass_s`, hourly by default). The middle generation is collected every third
young pass instead of every eleventh, so that each of its passes walks a third as much.
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


# Young passes between two of the middle generation (CPython's default is 10).
MIDDLE_EVERY = 2


@contextmanager
def freezing() -> Iterator[None]:
    """While inside, the survivors of each pass of the middle or oldest generation are frozen
    as it ends, and the middle generation is collected every MIDDLE_EVERY + 1 young passes."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], MIDDLE_EVERY, thresholds[2])
    gc.callbacks.append(_collected)
    try:
        yield
    finally:
        gc.callbacks.remove(_collected)
        gc.set_threshold(*thresholds)


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
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()
