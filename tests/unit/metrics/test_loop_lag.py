"""plumb_event_loop_lag_seconds: a loop held past a timer's due time is counted as lag."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from plumb.aggregator.metrics.collectors import LoopLag


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_a_held_loop_is_counted_as_lag():
    registry = CollectorRegistry()
    task = asyncio.create_task(LoopLag(registry).run())
    await asyncio.sleep(0)  # the timer is set
    time.sleep(0.3)  # hold the loop past it, as a long render would
    try:
        async with asyncio.timeout(10):
            while _sample(registry, "plumb_event_loop_lag_seconds_count") < 1:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    # Held 0.3 s against a 0.1 s timer: at least 0.2 s late, so above the 0.1 bucket.
    assert _sample(registry, "plumb_event_loop_lag_seconds_bucket", le="0.1") == 0
    assert _sample(registry, "plumb_event_loop_lag_seconds_sum") >= 0.2
