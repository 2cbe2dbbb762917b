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
again (`gc_full_pass_s`, hourly by default). The middle generation is collected after every
three young passes instead of every eleven, so that each of its passes walks a third as much.

CPython 3.11 counts the young generation net of frees, and every frozen reading freed as a
new one replaces it takes one off that count, so with sensor reports flowing the collector's
own trigger came about once a second, over up to 10,000 objects (threshold 700): young passes
of 9.3 ms and middle ones of 32 ms on average, up to 187 and 79 ms (bench/README.md, round
32). So `run` also starts a pass every YOUNG_EVERY_S, of the middle generation when its turn
has come, as the collector would; each walks what a tenth of a second allocated.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["freeze_long_lived", "freezing", "full_pass", "run", "young_pass"]

log = logging.getLogger(__name__)


def freeze_long_lived() -> None:
    """Take every object now tracked out of the collector's passes (the restored fleet)."""
    gc.freeze()


# Young passes between two of the middle generation (CPython's default is 10).
MIDDLE_EVERY = 2

# The longest time between two young passes, whatever the collector's count says (s).
YOUNG_EVERY_S = 0.1


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


def young_pass() -> int:
    """Collect the young generation, or the middle one once more than MIDDLE_EVERY young
    passes have run since its last (the collector's own rule); the generation collected."""
    generation = 1 if gc.get_count()[1] > gc.get_threshold()[1] else 0
    gc.collect(generation)
    return generation


async def run(full_pass_s: float) -> None:
    """Inside `freezing`, run `young_pass` every YOUNG_EVERY_S and `full_pass` every
    `full_pass_s`, until cancelled."""
    with freezing():
        due = time.monotonic() + full_pass_s
        while True:
            await asyncio.sleep(YOUNG_EVERY_S)
            if time.monotonic() >= due:
                full_pass()
                due = time.monotonic() + full_pass_s
            else:
                young_pass()


def _collected(phase: str, info: dict) -> None:
    # Called by the collector as a pass ends, on whichever thread allocated, GIL held.
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()
