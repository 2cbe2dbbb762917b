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
    loop_lag = LoopLag(registry)
    observed = asyncio.Event()
    observe = loop_lag.lag.observe
    loop_lag.lag.observe = lambda value: (observe(value), observed.set())  # type: ignore[method-assign]
    task = asyncio.create_task(loop_lag.run())
    # Runs after the task's first step (callbacks run in order), which sets the timer.
    asyncio.get_running_loop().call_soon(time.sleep, 0.3)  # held, as by a long render
    try:
        async with asyncio.timeout(10):
            await observed.wait()
    finally:
        task.cancel()
    assert _sample(registry, "plumb_event_loop_lag_seconds_count") == 1
    # Held 0.3 s against a 0.1 s timer: at least 0.2 s late, so above the 0.1 bucket.
    assert _sample(registry, "plumb_event_loop_lag_seconds_bucket", le="0.1") == 0
    assert _sample(registry, "plumb_event_loop_lag_seconds_sum") >= 0.2
