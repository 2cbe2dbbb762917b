"""The agent's reporter: a SensorReport stands in for the heartbeat where the aggregator's
Welcome says it takes it so, and heartbeats go out as before where it does not, or where the
node has no readings to report. After a stream's first report, only what moved goes out where
the Welcome says the aggregator takes that. A session's second poll and second report come a random
half to one and a half intervals after its first (`spread`), so that agents welcomed together
do not send together ever after.

The aggregator is a stand-in gRPC server in the test, recording what the agent sends.
"""

from __future__ import annotations

import asyncio
import logging
import random
import statistics
import time

import grpc
import pytest
from standin import streaming

from plumb import facts as wire
from plumb.agent import stream
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import spread
from plumb.sensors import GpuSensors
from plumb.v1 import agent_pb2, agent_pb2_grpc

FACTS = {"driver.driver_version": wire.Reading.ok("580.173.02")}
GPUS = [GpuSensors(0, temperature_celsius=40)]
# Reports every 0.2 s against a 1 s heartbeat: five reports to a heartbeat interval.
SETTINGS = StreamSettings(poll_interval_s=0.2, sensor_interval_s=0.2)
HEARTBEAT_S = 1.0


class Records(agent_pb2_grpc.AgentServiceServicer):
    """Welcomes one agent (saying whether reports may stand in for heartbeats and carry only
    what moved), acks its facts, and queues every heartbeat and sensor report it sends."""

    def __init__(self, sensors_heartbeat: bool, sensor_changes: bool = False):
        self.sensors_heartbeat = sensors_heartbeat
        self.sensor_changes = sensor_changes
        self.sent: asyncio.Queue[agent_pb2.ConnectRequest] = asyncio.Queue()

    async def Connect(self, request_iterator, context):  # noqa: N802
        await context.read()  # Hello
        settings = agent_pb2.ReportSettings(
            heartbeat_interval_s=HEARTBEAT_S,
            sensors_heartbeat=self.sensors_heartbeat,
            sensor_changes=self.sensor_changes,
        )
        welcome = agent_pb2.Welcome(session_id="s-1", report_settings=settings)
        await context.write(agent_pb2.ConnectResponse(welcome=welcome))
        while (msg := await context.read()) is not grpc.aio.EOF:
            kind = msg.WhichOneof("message")
            if kind == "full_facts":
                await context.write(agent_pb2.ConnectResponse(ack=agent_pb2.Ack(seq=1)))
            await self.sent.put(msg)


async def streamed(
    sensors_heartbeat: bool,
    gpus: list[GpuSensors],
    until,
    sense=None,
    collect=lambda: FACTS,
    settings: StreamSettings = SETTINGS,
    sensor_changes: bool = False,
) -> list:
    """What an agent with readings `gpus` (or from `sense`) and facts from `collect` sent,
    after its full facts, until `until(sent)`."""
    servicer = Records(sensors_heartbeat, sensor_changes)
    sent: list[agent_pb2.ConnectRequest] = []
    async with streaming(servicer, collect, settings, sense=sense or (lambda: gpus)):
        async with asyncio.timeout(30):
            assert (await servicer.sent.get()).WhichOneof("message") == "full_facts"
            while not until(sent):
                sent.append(await servicer.sent.get())
    return sent


def kinds(sent: list[agent_pb2.ConnectRequest]) -> list[str]:
    return [m.WhichOneof("message") for m in sent]


async def test_reports_stand_in_for_heartbeats_when_the_aggregator_takes_them():
    # Fifteen reports span three heartbeat intervals: not one heartbeat among them.
    sent = await streamed(True, GPUS, lambda s: kinds(s).count("sensors") >= 15)
    assert "heartbeat" not in kinds(sent)
    digest = wire.content_digest(FACTS)
    assert all((m.sensors.seq, m.sensors.content_sha256) == (1, digest) for m in sent)


async def test_an_older_aggregator_gets_readings_only_and_heartbeats_apart():
    sent = await streamed(False, GPUS, lambda s: kinds(s).count("heartbeat") >= 2)
    reports = [m.sensors for m in sent if m.WhichOneof("message") == "sensors"]
    assert reports and all(not r.content_sha256 and r.seq == 0 for r in reports)
    assert all(m.heartbeat.seq == 1 for m in sent if m.WhichOneof("message") == "heartbeat")


async def test_a_node_without_readings_keeps_heartbeating():
    sent = await streamed(True, [], lambda s: kinds(s).count("heartbeat") >= 2)
    assert set(kinds(sent)) == {"heartbeat"}


async def test_a_sensor_read_that_raises_is_logged_once_and_the_next_good_one_reports(caplog):
    reads = 0
    errors = {2: "NVML_ERROR_GPU_IS_LOST", 3: "NVML_ERROR_GPU_IS_LOST", 4: "NVML_ERROR_UNKNOWN"}

    def sense() -> list[GpuSensors]:
        nonlocal reads
        reads += 1
        if reads in errors:
            raise RuntimeError(errors[reads])
        return GPUS

    caplog.set_level(logging.INFO, logger="plumb.agent.stream")
    sent = await streamed(True, GPUS, lambda s: kinds(s).count("sensors") >= 3, sense=sense)
    assert reads >= 5  # reading went on after the three failures
    failed = [r for r in caplog.records if r.getMessage() == "sensor read failed"]
    # The same error twice in a row is logged once; a different one again.
    assert [r.error for r in failed] == ["NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_UNKNOWN"]
    (recovered,) = [r for r in caplog.records if r.getMessage() == "sensor reads recovered"]
    assert recovered.error_was == "NVML_ERROR_UNKNOWN"
    assert kinds(sent).count("sensors") >= 3


@pytest.mark.parametrize("sensor_changes", [True, False])
async def test_after_a_whole_report_only_what_moved_goes_where_the_aggregator_takes_it(
    sensor_changes,
):
    two = [GpuSensors(0, temperature_celsius=40), GpuSensors(1, temperature_celsius=50)]
    warmer = [two[0]._replace(temperature_celsius=41), two[1]]
    reads = iter([two, warmer, warmer, warmer[:1]])
    sent = await streamed(
        True,
        [],
        lambda s: kinds(s).count("sensors") >= 4,
        sense=lambda: next(reads, warmer[:1]),
        sensor_changes=sensor_changes,
    )
    reports = [m.sensors for m in sent if m.WhichOneof("message") == "sensors"][:4]
    if not sensor_changes:  # an older aggregator: every report whole
        assert [len(r.gpus) for r in reports] == [2, 2, 2, 1]
        assert not any(r.changes_only for r in reports)
        return
    # Whole; GPU 0's temperature (bit 0); nothing moved, yet a report (it is the heartbeat);
    # whole again, as GPU 1 went.
    assert [r.changes_only for r in reports] == [False, True, True, False]
    assert [(g.index, g.moved, g.temperature_celsius) for g in reports[1].gpus] == [(0, 1, 41)]
    assert not reports[2].gpus
    assert [g.index for g in reports[3].gpus] == [0]


class Draw(random.Random):
    """A generator whose `random()` is always `value`."""

    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(("draw", "gap_s"), [(0.0, 15.0), (0.5, 30.0), (0.9, 42.0)])
def test_a_spread_gap_runs_from_half_an_interval_to_one_and_a_half(draw, gap_s):
    # random() is in [0, 1): a 30 s interval gives gaps from 15 s up to (not including) 45 s.
    assert spread(30.0, Draw(draw)) == pytest.approx(gap_s)


def test_a_fleet_welcomed_at_once_sends_its_second_reports_evenly_over_an_interval():
    rng = random.Random(7)
    gaps = [spread(30.0, rng) for _ in range(10_000)]
    assert 15.0 <= min(gaps) < 15.3 and 44.7 < max(gaps) < 45.0
    assert abs(statistics.mean(gaps) - 30.0) < 0.3  # as many messages as without spreading
    tenths = [0] * 10
    for gap in gaps:
        tenths[min(int((gap - 15.0) / 3.0), 9)] += 1
    assert max(tenths) < 1_200, tenths  # no tenth of the 30 s holds over 12 %


def timed(read, log: list[float]):
    """`read`, noting when each call is made."""

    def timed_read():
        log.append(time.monotonic())
        return read()

    return timed_read


async def test_the_second_sensor_report_comes_at_the_spread_point_then_every_interval(
    monkeypatch,
):
    monkeypatch.setattr(stream, "spread", lambda interval_s, rng=None: interval_s / 20)
    reads: list[float] = []
    settings = StreamSettings(poll_interval_s=60, sensor_interval_s=2.0)
    sent = await streamed(
        True,
        GPUS,
        lambda s: kinds(s).count("sensors") >= 3,
        sense=timed(lambda: GPUS, reads),
        settings=settings,
    )
    assert kinds(sent).count("sensors") == 3
    first, second, third = reads[:3]
    assert second - first < 1.0  # a twentieth of the interval (0.1 s), not all of it
    assert third - second >= 1.9  # then the interval


async def test_the_first_poll_comes_at_the_spread_point_then_every_poll_interval(monkeypatch):
    monkeypatch.setattr(stream, "spread", lambda interval_s, rng=None: interval_s / 20)
    polls: list[float] = []
    versions = iter(range(1_000))

    def changing() -> dict:  # every poll finds a new driver, so every poll sends a delta
        return {"driver.driver_version": wire.Reading.ok(f"580.{next(versions)}")}

    settings = StreamSettings(poll_interval_s=2.0, sensor_interval_s=60)
    sent = await streamed(
        True,
        [],
        lambda s: kinds(s).count("delta") >= 2,
        collect=timed(changing, polls),
        settings=settings,
    )
    assert kinds(sent) == ["delta", "delta"]
    full_facts, first, second = polls[:3]
    assert first - full_facts < 1.0  # a twentieth of the poll interval (0.1 s)
    assert second - first >= 1.9
