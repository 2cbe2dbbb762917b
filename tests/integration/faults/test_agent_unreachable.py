"""An agent whose aggregator is unreachable: it says why in its log, and the time spent
unreachable does not widen its reconnect window (the delay after the port opens is drawn
from the first window), so it is back promptly once the aggregator is; all on the one
channel it opened, which gRPC connects again."""

from __future__ import annotations

import asyncio
import logging
import signal

from conftest import free_port
from timeouts import scaled

from plumb import facts as wire
from plumb.agent import stream
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient

from .conftest import DbAggregator

FACTS = {"host.kernel": wire.Reading.ok("6.8"), "driver.driver_version": wire.Reading.ok("550")}


async def test_unreachable_is_logged_and_does_not_widen_the_reconnect_window(
    tmp_path, caplog, monkeypatch
):
    caplog.set_level(logging.WARNING, logger="plumb.agent.stream")
    target = f"127.0.0.1:{free_port()}"  # nothing listens here yet
    settings = StreamSettings(
        poll_interval_s=0.2,
        reconnect_window_s=0.5,
        backoff_max_s=60.0,  # what ~10 counted failures would widen the window to
        probe_max_s=0.2,
        unreachable_retry_s=0.5,
    )
    # The failures in a row each reconnect's delay is drawn for: the window is
    # reconnect_window_s * 2**failures, so 0 means the unreachable time did not widen it.
    widened_by: list[int] = []
    draw = stream.reconnect_delay

    def delay(settings: StreamSettings, failures: int) -> float:
        widened_by.append(failures)
        return draw(settings, failures)

    monkeypatch.setattr(stream, "reconnect_delay", delay)
    client = StreamClient(target, Identity("far-1", "test", "b-1"), lambda: FACTS, settings)
    stop = asyncio.Event()
    task = asyncio.create_task(client.run(stop))
    agg = DbAggregator(tmp_path, grpc=target)

    def closed() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == "stream closed"]

    try:
        # The first attempt, then one about every unreachable_retry_s: each says why.
        await _until(lambda: len(closed()) >= 4, "four failed attempts logged")
        assert {r.code for r in closed()} == {"UNAVAILABLE"}  # type: ignore[attr-defined]
        assert client.connections == 0 and widened_by == []

        await asyncio.to_thread(agg.start)  # returns once /readyz answers
        await _until(lambda: client.connections == 1, "the agent reconnected")
        assert widened_by == [0]
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=scaled(15))
        if agg.proc is not None:
            agg.stop()


async def test_an_agent_comes_back_from_a_killed_aggregator_on_the_channel_it_opened(
    tmp_path, monkeypatch
):
    channels: list[object] = []
    make = StreamClient._channel

    def counted(self: StreamClient):
        channel = make(self)
        channels.append(channel)
        return channel

    monkeypatch.setattr(StreamClient, "_channel", counted)
    agg = DbAggregator(tmp_path, grpc=f"127.0.0.1:{free_port()}")
    await asyncio.to_thread(agg.start)
    settings = StreamSettings(poll_interval_s=0.2, reconnect_window_s=0.5, probe_max_s=0.2)
    client = StreamClient(agg.grpc, Identity("back-1", "test", "b-1"), lambda: FACTS, settings)
    stop = asyncio.Event()
    task = asyncio.create_task(client.run(stop))
    try:
        await _until(lambda: client.connections == 1, "the agent connected")
        await asyncio.to_thread(agg.stop, signal.SIGKILL)
        await asyncio.to_thread(agg.start)  # the same port and database
        await _until(lambda: client.connections == 2, "the agent reconnected")
        assert len(channels) == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=scaled(15))
        agg.stop()


async def _until(done, what: str) -> None:
    """Poll ``done`` until true; fail naming ``what`` after a scaled deadline."""
    deadline = asyncio.get_running_loop().time() + scaled(30)
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.05)
