"""The agent's reconnect: Hello offers the digest of the last facts sent, and where the
aggregator's Welcome says it holds them (`resumed`) the agent sends no FullFacts, only a
delta of seq 1 for what changed while it was away; where it does not, FullFacts as always.
A resumed session's first sensor report waits a draw over one interval (a restarted
aggregator's whole fleet resumes at once); a session that sent FullFacts reports at once.

The aggregator is a stand-in gRPC server that ends the first stream after acking its
FullFacts, then answers the second Hello as the test says, recording what comes.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time

import grpc
from standin import streaming

from plumb import facts as wire
from plumb.agent import stream
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import stagger
from plumb.sensors import GpuSensors
from plumb.v1 import agent_pb2, agent_pb2_grpc

BEFORE = {"driver.driver_version": wire.Reading.ok("580.173.02")}
AFTER = {"driver.driver_version": wire.Reading.ok("590.44.01")}
# Reconnect within a fraction of a second; polls far apart, so a delta that comes at once
# after the second Welcome is the resume's immediate poll, not a timed one.
SETTINGS = StreamSettings(poll_interval_s=60, reconnect_window_s=0.05, probe_max_s=0.2)
GPUS = [GpuSensors(0, temperature_celsius=40)]


class Restarting(agent_pb2_grpc.AgentServiceServicer):
    """Acks the first stream's FullFacts and ends it; welcomes the second with `resumed`
    and queues the second Hello and every message after it."""

    def __init__(self, resumed: bool):
        self.resumed = resumed
        self.streams = 0
        self.acked = asyncio.Event()
        self.restart = asyncio.Event()  # set by the test: end the first stream
        self.first_hello: agent_pb2.ConnectRequest | None = None
        self.sent: asyncio.Queue[agent_pb2.ConnectRequest] = asyncio.Queue()

    async def Connect(self, request_iterator, context):  # noqa: N802
        self.streams += 1
        first = self.streams == 1
        hello = await context.read()
        if first:
            self.first_hello = hello
        else:
            await self.sent.put(hello)
        welcome = agent_pb2.Welcome(session_id=f"s-{self.streams}", resumed=self.resumed)
        await context.write(agent_pb2.ConnectResponse(welcome=welcome))
        while (msg := await context.read()) is not grpc.aio.EOF:
            if first:
                assert msg.WhichOneof("message") == "full_facts"
                await context.write(agent_pb2.ConnectResponse(ack=agent_pb2.Ack(seq=1)))
                self.acked.set()
                await self.restart.wait()
                return  # the stream ends: the agent reconnects
            await self.sent.put(msg)


async def second_stream(
    resumed: bool, settings: StreamSettings = SETTINGS, until: str | None = None
) -> list[tuple[float, agent_pb2.ConnectRequest]]:
    """The second Hello and the first facts message after it, the node's facts having
    moved from BEFORE to AFTER while the first stream ended; with `until`, every message
    up to the first of that kind. Each with when it arrived."""
    servicer = Restarting(resumed)
    facts = BEFORE
    async with streaming(servicer, lambda: facts, settings, sense=lambda: GPUS):
        async with asyncio.timeout(30):
            await servicer.acked.wait()
            facts = AFTER
            servicer.restart.set()
            sent = [(time.monotonic(), await servicer.sent.get())]
            assert servicer.first_hello is not None
            assert servicer.first_hello.hello.content_sha256 == b""  # nothing sent before it
            while len(sent) < 2 or (until and sent[-1][1].WhichOneof("message") != until):
                msg = await servicer.sent.get()
                if msg.WhichOneof("message") != "sensors" or until == "sensors":
                    sent.append((time.monotonic(), msg))
            return sent


async def test_a_resumed_stream_sends_only_what_changed_as_delta_seq_1():
    (_, hello), (_, first) = await second_stream(resumed=True)
    assert hello.hello.content_sha256 == wire.content_digest(BEFORE)
    assert first.WhichOneof("message") == "delta"
    assert first.delta.seq == 1
    assert dict(first.delta.changed) == {
        "driver.driver_version": wire.to_fact(AFTER["driver.driver_version"])
    }
    assert first.delta.content_sha256 == wire.content_digest(AFTER)


async def test_a_stream_not_resumed_sends_full_facts_as_before():
    (_, hello), (_, first) = await second_stream(resumed=False)
    assert hello.hello.content_sha256 == wire.content_digest(BEFORE)
    assert first.WhichOneof("message") == "full_facts"
    assert first.full_facts.seq == 1
    assert wire.flatten(first.full_facts.facts) == AFTER


# Reports a minute apart: a report that comes within the test's 30 s came at once, or at the
# stagger drawn, not an interval later.
REPORTS_A_MINUTE_APART = StreamSettings(
    poll_interval_s=60, sensor_interval_s=60, reconnect_window_s=0.05, probe_max_s=0.2
)


async def test_a_resumed_stream_reports_its_sensors_after_a_draw_over_one_interval(monkeypatch):
    draws: list[float] = []

    def drawn(interval_s, rng=None):
        draws.append(interval_s)
        return 1.0

    monkeypatch.setattr(stream, "stagger", drawn)
    sent = await second_stream(True, REPORTS_A_MINUTE_APART, until="sensors")
    assert draws == [60]  # over the sensor interval
    (hello_at, _), *_, (report_at, _) = sent
    assert report_at - hello_at >= 1.0  # the drawn second, not at once
    assert [m.WhichOneof("message") for _, m in sent] == ["hello", "delta", "sensors"]


async def test_a_stream_that_sent_full_facts_reports_its_sensors_at_once(monkeypatch):
    draws: list[float] = []
    monkeypatch.setattr(stream, "stagger", lambda interval_s, rng=None: draws.append(0) or 0.0)
    sent = await second_stream(False, REPORTS_A_MINUTE_APART, until="sensors")
    assert draws == []  # no delay drawn: its first report follows its FullFacts
    assert [m.WhichOneof("message") for _, m in sent] == ["hello", "full_facts", "sensors"]


def test_a_fleet_resumed_at_once_reports_evenly_over_one_interval():
    rng = random.Random(7)
    delays = [stagger(30.0, rng) for _ in range(10_000)]
    assert 0.0 <= min(delays) < 0.3 and 29.7 < max(delays) < 30.0
    assert abs(statistics.mean(delays) - 15.0) < 0.3
    tenths = [0] * 10
    for delay in delays:
        tenths[int(delay / 3.0)] += 1
    assert max(tenths) < 1_200, tenths  # no tenth of the 30 s holds over 12 %
