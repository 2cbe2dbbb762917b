"""An agent whose aggregator is unreachable: it says why in its log, and the time spent
unreachable does not widen its reconnect window, so it is back promptly once the
aggregator is."""

from __future__ import annotations

import asyncio
import logging
import time

from conftest import free_port

from plumb import facts as wire
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient

from .conftest import DbAggregator

FACTS = {"host.kernel": wire.Reading.ok("6.8"), "driver.driver_version": wire.Reading.ok("550")}


async def test_unreachable_is_logged_and_does_not_delay_the_reconnect(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="plumb.agent.stream")
    target = f"127.0.0.1:{free_port()}"  # nothing listens here yet
    settings = StreamSettings(
        poll_interval_s=0.2,
        reconnect_window_s=0.5,
        backoff_max_s=60.0,  # what ~10 counted failures would widen the window to
        probe_max_s=0.2,
        unreachable_retry_s=0.5,
    )
    client = StreamClient(target, Identity("far-1", "test", "b-1"), lambda: FACTS, settings)
    stop = asyncio.Event()
    task = asyncio.create_task(client.run(stop))
    agg = DbAggregator(tmp_path, grpc=target)
    try:
        await asyncio.sleep(5.0)
        closed = [r for r in caplog.records if r.getMessage() == "stream closed"]
        # The first attempt, then one about every unreachable_retry_s: each says why.
        assert len(closed) >= 4, [r.getMessage() for r in caplog.records]
        assert {r.code for r in closed} == {"UNAVAILABLE"}  # type: ignore[attr-defined]
        assert client.connections == 0

        await asyncio.to_thread(agg.start)  # returns once /readyz answers
        ready_at = time.monotonic()
        while time.monotonic() - ready_at < 30:
            if client.connections:
                break
            await asyncio.sleep(0.05)
        # Within one probe and one window of the port opening (it opens before /readyz).
        assert client.connections == 1 and time.monotonic() - ready_at < 3.0
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)
        if agg.proc is not None:
            agg.stop()
