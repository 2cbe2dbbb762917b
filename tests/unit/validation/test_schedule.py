"""Scheduled validation: when each phase is due, and why a due slot starts nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, time, timedelta

import pytest

from plumb.aggregator.settings import ScheduledPhase, ValidationSettings
from plumb.aggregator.state.live import LiveState, Sensors
from plumb.aggregator.validation.schedule import Scheduler, busiest_gpu, first_due
from plumb.facts import Reading
from plumb.sensors import GpuSensors

T0 = datetime(2026, 12, 1, 1, 30, tzinfo=UTC)


class FakeRun:
    def __init__(self, nodes: tuple[str, ...]) -> None:
        self.id, self.nodes, self.finished_at = f"run-{len(nodes)}", nodes, None


class FakeValidator:
    """What the scheduler uses of the Validator: the runs in memory, and start."""

    def __init__(self) -> None:
        self.runs: list[FakeRun] = []
        self.asked: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def recent(self) -> list[FakeRun]:
        return self.runs

    def start(self, *, phases: tuple[str, ...], nodes: tuple[str, ...]) -> FakeRun:
        self.asked.append((phases, nodes))
        run = FakeRun(nodes)
        self.runs.append(run)
        return run


def _state(*connected: str, down: tuple[str, ...] = ()) -> LiveState:
    state = LiveState()
    for name in (*connected, *down):
        node = state.node(name, T0)
        node.connected = name in connected
    return state


def _scheduler(validator, state, *, leader=True, utilization=None, entries=None, clock=None):
    counted: list[tuple[str, str]] = []
    busy = utilization or {}
    sched = Scheduler(
        validator,
        state,
        entries or [ScheduledPhase(phase="conformance", every_s=3600)],
        is_leader=lambda: leader,
        utilization=lambda n: busy.get(n.name),
        count=lambda phase, outcome: counted.append((phase, outcome)),
        clock=clock or (lambda: T0),
    )
    return sched, counted


def test_a_due_slot_validates_every_connected_node_and_is_counted():
    validator = FakeValidator()
    sched, counted = _scheduler(validator, _state("a", "b", down=("c",)))
    run = sched.slot(ScheduledPhase(phase="conformance", every_s=3600))
    assert run is validator.runs[0]
    assert validator.asked == [(("conformance",), ("a", "b"))]  # c is down
    assert counted == [("conformance", "started")]


def test_no_slot_starts_while_any_run_is_in_progress():
    validator = FakeValidator()
    sched, counted = _scheduler(validator, _state("a"))
    entry = ScheduledPhase(phase="conformance", every_s=3600)
    sched.slot(entry)
    assert sched.slot(entry) is None  # the first is still running
    assert counted == [("conformance", "started"), ("conformance", "overlap")]
    validator.runs[0].finished_at = T0
    assert sched.slot(entry) is not None


def test_idle_only_skips_busy_and_unknown_gpus_and_waits_when_none_is_idle():
    validator = FakeValidator()
    perf = ScheduledPhase(phase="performance", every_s=86400, idle_only=True, busy_above=0.05)
    # a idle, b at 80 %, c reports no utilisation: unknown is not idle.
    sched, counted = _scheduler(
        validator, _state("a", "b", "c"), utilization={"a": 0.0, "b": 0.8}, entries=[perf]
    )
    sched.slot(perf)
    assert validator.asked == [(("performance",), ("a",))]

    busy, counted = _scheduler(
        FakeValidator(), _state("b", "c"), utilization={"b": 0.8}, entries=[perf]
    )
    assert busy.slot(perf) is None and counted == [("performance", "busy")]


def test_a_follower_or_an_empty_fleet_starts_nothing():
    entry = ScheduledPhase(phase="conformance", every_s=3600)
    follower, counted = _scheduler(FakeValidator(), _state("a"), leader=False)
    assert follower.slot(entry) is None and counted == []  # the leader counts the slot
    empty, counted = _scheduler(FakeValidator(), _state(down=("a",)))
    assert empty.slot(entry) is None and counted == [("conformance", "no_nodes")]


def test_first_due_is_the_next_time_of_day_or_one_interval_away():
    nightly = ScheduledPhase(phase="performance", every_s=86400, at=time(2, 0))
    assert first_due(nightly, T0) == datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    past = ScheduledPhase(phase="performance", every_s=86400, at=time(1, 0))
    assert first_due(past, T0) == datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    # Hourly from 00:10, started at 01:30: 02:10 is next (00:10, 01:10 have passed).
    hourly_from = ScheduledPhase(phase="conformance", every_s=3600, at=time(0, 10))
    assert first_due(hourly_from, T0) == datetime(2026, 12, 1, 2, 10, tzinfo=UTC)
    # Exactly on a slot: that slot has come, the next is an interval on.
    on_slot = ScheduledPhase(phase="conformance", every_s=1800, at=time(0, 30))
    assert first_due(on_slot, T0) == datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    hourly = ScheduledPhase(phase="conformance", every_s=3600)
    assert first_due(hourly, T0) == T0 + timedelta(hours=1)


def test_an_unknown_phase_stops_start_up_naming_it():
    with pytest.raises(ValueError, match=r"unknown phase\(s\) \['conformace'\]"):
        _scheduler(
            FakeValidator(), _state(), entries=[ScheduledPhase(phase="conformace", every_s=60)]
        )


def test_the_schedule_setting_reads_json_and_refuses_short_intervals():
    got = ValidationSettings.model_validate(
        {"schedule": [{"phase": "performance", "every_s": 86400, "at": "02:00", "idle_only": True}]}
    )
    assert got.schedule[0].at == time(2, 0) and got.schedule[0].idle_only
    with pytest.raises(ValueError, match="every_s"):
        ValidationSettings.model_validate({"schedule": [{"phase": "conformance", "every_s": 5}]})


async def test_the_loop_starts_each_due_slot_and_a_run_in_progress_skips_the_next():
    # Each clock read moves 70 minutes on, past an hourly slot: every pass finds one due.
    reads = iter(T0 + timedelta(minutes=70 * i) for i in range(10_000))
    validator = FakeValidator()
    counted: list[tuple[str, str]] = []
    three = asyncio.Event()

    def count(phase: str, outcome: str) -> None:
        counted.append((phase, outcome))
        if len(counted) == 3:
            three.set()

    sched = Scheduler(
        validator,
        _state("a"),
        [ScheduledPhase(phase="conformance", every_s=3600)],
        is_leader=lambda: True,
        utilization=lambda n: None,
        count=count,
        clock=lambda: next(reads),
    )
    ready = asyncio.Event()
    ready.set()
    task = asyncio.create_task(sched.run(ready))
    await asyncio.wait_for(three.wait(), timeout=10)
    task.cancel()
    # The first slot started a run that never finishes: the next ones overlap it.
    assert counted[:3] == [("conformance", "started"), *[("conformance", "overlap")] * 2]
    assert len(validator.asked) == 1


def test_the_busiest_gpu_is_known_only_when_every_gpu_reported_utilisation():
    state = LiveState()
    node = state.node("n", T0)
    node.facts = {f"gpus[{i}].index": Reading.ok(i) for i in range(2)}
    assert busiest_gpu(node) is None  # no report yet
    node.sensors = Sensors(T0, (GpuSensors(0, gpu_utilization_ratio=0.0),))
    assert busiest_gpu(node) is None  # GPU 1 missing from the report
    node.sensors = Sensors(T0, (GpuSensors(0, gpu_utilization_ratio=0.0), GpuSensors(1)))
    assert busiest_gpu(node) is None  # GPU 1 does not report utilisation
    node.sensors = Sensors(
        T0, (GpuSensors(0, gpu_utilization_ratio=0.02), GpuSensors(1, gpu_utilization_ratio=0.9))
    )
    assert busiest_gpu(node) == 0.9
