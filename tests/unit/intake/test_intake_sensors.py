"""Sensor readings on the stream: bounded at ingest, kept as the latest value by the intake,
never written, diffed or evaluated, and gone with the stream."""

from __future__ import annotations

import pytest
from test_ingest_servicer import Aborted, FakeContext, end, full, open_stream, servicer
from test_intake import h100, make

from plumb import facts as wire
from plumb.aggregator.ingest import limits
from plumb.aggregator.intake.intake import StreamStart
from plumb.aggregator.settings import IngestSettings
from plumb.sensors import GpuSensors
from plumb.v1 import agent_pb2, facts_pb2


def report(*gpus: facts_pb2.GpuSensors) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(sensors=facts_pb2.SensorReport(gpus=gpus))


def gpu(index: int = 0, **readings: int) -> facts_pb2.GpuSensors:
    return facts_pb2.GpuSensors(index=index, **readings)


def test_readings_arrive_in_the_units_they_are_exported_in():
    msg = gpu(
        1,
        temperature_celsius=41,
        power_draw_milliwatts=71_250,
        sm_clock_mhz=1980,
        gpu_utilization_percent=35,
        memory_used_bytes=512 << 20,
    )
    assert limits.check_sensors(report(msg).sensors, 0, IngestSettings(), None) == (
        GpuSensors(
            index=1,
            temperature_celsius=41,
            power_draw_watts=71.25,
            sm_clock_mhz=1980,
            gpu_utilization_ratio=0.35,
            memory_used_bytes=536_870_912,
        ),
    )


@pytest.mark.parametrize(
    ("gpus", "says"),
    [
        ([gpu(0, temperature_celsius=201)], "gpus[0].temperature_celsius: 201 is beyond 200"),
        ([gpu(0, gpu_utilization_percent=101)], "gpus[0].gpu_utilization_percent: 101"),
        # NVML's PCIe replay counter is an unsigned int; 2**53 is where a float sample rounds.
        ([gpu(0, pcie_replay_count=(1 << 32) + 1)], "gpus[0].pcie_replay_count: 4294967297"),
        ([gpu(0, nvlink_crc_flit_errors=(1 << 53) + 1)], "gpus[0].nvlink_crc_flit_errors"),
        ([gpu(0), gpu(0)], "gpus[1].index: GPU 0 is reported twice"),
        ([gpu(4)], "gpus[0].index is 4, beyond the 4 GPUs"),
        ([gpu(i) for i in range(5)], "5 GPUs is more than the 4"),
    ],
)
def test_a_reading_no_gpu_reports_is_refused_naming_the_field(gpus, says):
    with pytest.raises(limits.Refused) as refused:
        limits.check_sensors(report(*gpus).sensors, 0, IngestSettings(max_gpus_per_node=4), None)
    assert says in str(refused.value)


async def test_the_latest_report_is_kept_and_nothing_is_written_or_evaluated():
    ingest, state, _, writer = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100()))
    updates, generation = len(writer.updates), state.generation
    await ctx.inbox.put(report(gpu(0, temperature_celsius=40), gpu(1, temperature_celsius=44)))
    await ctx.inbox.put(report(gpu(0, temperature_celsius=41), gpu(1, temperature_celsius=44)))
    await ctx.reply(full(h100(), seq=2))  # answered after both reports were handled
    held = state.get("gpu-1").sensors  # type: ignore[union-attr]
    assert held is not None and [g.temperature_celsius for g in held.gpus] == [41, 44]
    # The resend is the only update since the facts; the reports added none, nor a verdict.
    assert len(writer.updates) == updates + 1
    assert writer.updates[-1].changes == ()
    assert state.generation == generation + 1  # the resend's, not the reports'
    await end(task, ctx)
    assert state.get("gpu-1").sensors is None  # type: ignore[union-attr]


async def test_a_report_before_full_facts_is_ignored():
    ingest, state, _, writer = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.inbox.put(report(gpu(0, temperature_celsius=40)))
    await ctx.reply(full(h100()))
    assert state.get("gpu-1").sensors is None  # type: ignore[union-attr]
    await end(task, ctx)


async def test_a_bad_report_ends_the_stream_naming_the_field():
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100()))
    await ctx.inbox.put(report(gpu(0, temperature_celsius=40)))
    await ctx.inbox.put(report(gpu(0, temperature_celsius=400)))
    with pytest.raises(Aborted) as aborted:
        await task
    assert aborted.value.code.name == "INVALID_ARGUMENT"
    assert "gpus[0].temperature_celsius: 400" in str(aborted.value)
    # The stream is gone, and its readings with it; the bad one was never kept.
    assert state.get("gpu-1").sensors is None  # type: ignore[union-attr]


def changes(*gpus: facts_pb2.GpuSensors) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(sensors=facts_pb2.SensorReport(gpus=gpus, changes_only=True))


async def test_changes_apply_to_the_streams_last_report_and_a_gpu_left_out_keeps_its_own():
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    assert ctx.written[0].welcome.report_settings.sensor_changes
    await ctx.reply(full(h100()))
    await ctx.inbox.put(
        report(
            gpu(0, temperature_celsius=40, gpu_utilization_percent=35),
            gpu(1, temperature_celsius=44, power_draw_milliwatts=300_000),
        )
    )
    # GPU 1's power moves and its utilisation goes to 0 (bits 1 and 4); GPU 0 is left out.
    await ctx.inbox.put(
        changes(gpu(1, power_draw_milliwatts=310_500, gpu_utilization_percent=0, moved=0b10010))
    )
    await ctx.reply(full(h100(), seq=2))  # answered after both reports were handled
    held = state.get("gpu-1").sensors  # type: ignore[union-attr]
    assert held is not None
    assert held.gpus == (
        GpuSensors(0, temperature_celsius=40, gpu_utilization_ratio=0.35),
        GpuSensors(1, temperature_celsius=44, power_draw_watts=310.5, gpu_utilization_ratio=0.0),
    )
    await end(task, ctx)


@pytest.mark.parametrize(
    ("first", "says"),
    [
        (None, "changes_only: this stream sent no whole report to apply the changes to"),
        (report(gpu(0, temperature_celsius=40)), "gpus[0].index: GPU 1 is not in the readings"),
    ],
)
async def test_changes_without_their_gpu_in_a_whole_report_end_the_stream(first, says):
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100()))
    if first is not None:
        await ctx.inbox.put(first)
    await ctx.inbox.put(changes(gpu(1, temperature_celsius=41, moved=0b1)))
    with pytest.raises(Aborted) as aborted:
        await task
    assert aborted.value.code.name == "INVALID_ARGUMENT"
    assert says in str(aborted.value)
    assert state.get("gpu-1").sensors is None  # type: ignore[union-attr]


def test_only_the_nodes_open_stream_sets_its_readings():
    intake, state, *_ = make()
    intake.report("gpu-1", 1, h100(), "d1", StreamStart("s-new", "b1", "0.1.0"))
    intake.sensors("gpu-1", "s-old", (GpuSensors(0, temperature_celsius=90),))
    assert state.get("gpu-1").sensors is None  # type: ignore[union-attr]
    intake.sensors("gpu-1", "s-new", (GpuSensors(0, temperature_celsius=40),))
    intake.disconnected("gpu-1", "s-old")  # a superseded stream's end changes nothing
    held = state.get("gpu-1").sensors  # type: ignore[union-attr]
    assert held is not None and held.gpus == (GpuSensors(0, temperature_celsius=40),)


def beat(seq: int, digest: bytes) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=seq, content_sha256=digest))


def live(seq: int, digest: bytes, *gpus: facts_pb2.GpuSensors) -> agent_pb2.ConnectRequest:
    """A SensorReport standing in for a heartbeat."""
    report = facts_pb2.SensorReport(gpus=gpus, seq=seq, content_sha256=digest)
    return agent_pb2.ConnectRequest(sensors=report)


async def synced(ingest, state, ctx: FakeContext, seq: int = 1):
    """A stream open with h100()'s FullFacts answered; its task and the node."""
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100(), seq=seq))
    node = state.get("gpu-1")
    assert node is not None
    return task, node


async def test_the_welcome_says_reports_may_stand_in_for_heartbeats():
    ingest, *_ = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    assert ctx.written[0].welcome.report_settings.sensors_heartbeat
    await end(task, ctx)


async def test_a_report_with_the_held_hash_keeps_the_node_alive_as_a_heartbeat_would():
    ingest, state, _, writer = servicer()
    ctx = FakeContext()
    task, node = await synced(ingest, state, ctx)
    reported_at, updates, generation = node.last_report_at, len(writer.updates), state.generation
    await ctx.inbox.put(live(1, wire.content_digest(h100()), gpu(0, temperature_celsius=40)))
    # Answered only after the report was handled: the stale hash gets its Resync.
    answer = await ctx.reply(beat(1, bytes(32)))
    assert answer.resync.reason == "Heartbeat hash differs from held facts"
    assert node.last_report_at > reported_at  # alive, as a heartbeat says
    assert node.sensors is not None and node.sensors.gpus[0].temperature_celsius == 40
    # Liveness is not a change of facts: nothing written (no shared database here), no verdict.
    assert len(writer.updates) == updates and state.generation == generation
    await end(task, ctx)


async def test_a_report_with_a_stale_hash_asks_for_a_resync_and_keeps_its_readings():
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task, node = await synced(ingest, state, ctx)
    reported_at = node.last_report_at
    answer = await ctx.reply(live(1, bytes(32), gpu(0, temperature_celsius=40)))
    assert answer.resync.reason == "SensorReport hash differs from held facts"
    assert node.last_report_at == reported_at  # not alive on a hash that disagrees
    assert node.sensors is not None  # readings are no facts: kept whatever the hash says
    await end(task, ctx)


async def test_a_report_standing_in_for_a_heartbeat_may_not_go_back_in_seq():
    ingest, _, _, _ = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100(), seq=2))
    await ctx.inbox.put(live(1, wire.content_digest(h100()), gpu(0)))
    with pytest.raises(Aborted) as aborted:
        await task
    assert aborted.value.code.name == "INVALID_ARGUMENT"
    assert "SensorReport seq 1 goes backwards" in str(aborted.value)


async def test_a_report_without_the_hash_is_readings_only():
    """An older agent's report: it heartbeats apart, so its reports move no report time."""
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task, node = await synced(ingest, state, ctx)
    reported_at = node.last_report_at
    await ctx.inbox.put(report(gpu(0, temperature_celsius=40)))
    await ctx.reply(beat(1, bytes(32)))  # answered after the report was handled
    assert node.last_report_at == reported_at
    assert node.sensors is not None and node.sensors.gpus[0].temperature_celsius == 40
    await end(task, ctx)
