"""Validation on a schedule, as autopilot runs its checks: opt-in per phase
(validation.schedule), started by the leader only, never while another run is in progress,
and, for phases marked idle_only, only on nodes whose GPUs are idle. The runs are ordinary
validations: stored, exported and graded like one started over HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from plumb.aggregator.recipes.check_catalog import PHASES
from plumb.aggregator.settings import ScheduledPhase
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.validation.model import ValidationRun
from plumb.aggregator.validation.orchestrator import Validator

log = logging.getLogger(__name__)

# Re-check the clock at least this often, so a sleep never outlives a clock step for long.
_MAX_SLEEP_S = 60.0


class Scheduler:
    """Starts each scheduled phase when due; `count(phase, outcome)` records each slot."""

    def __init__(
        self,
        validator: Validator,
        state: LiveState,
        entries: Sequence[ScheduledPhase],
        *,
        is_leader: Callable[[], bool],
        utilization: Callable[[NodeState], float | None],
        count: Callable[[str, str], None],
        clock: Callable[[], datetime],
    ) -> None:
        """``utilization``: a node's busiest GPU's utilisation (0–1), None where unknown.

        Raises ValueError naming an unknown phase: a typo must stop start-up, not go quiet.
        """
        unknown = sorted({e.phase for e in entries} - set(PHASES))
        if unknown:
            raise ValueError(
                f"validation.schedule names unknown phase(s) {unknown}; phases are {list(PHASES)}"
            )
        self._validator = validator
        self._state = state
        self._entries = tuple(entries)
        self._is_leader = is_leader
        self._utilization = utilization
        self._count = count
        self._clock = clock

    async def run(self, ready: asyncio.Event) -> None:
        """Once ``ready`` (the stored nodes restored), start each entry when due, until
        cancelled."""
        if not self._entries:
            return
        await ready.wait()
        now = self._clock()
        due = [first_due(e, now) for e in self._entries]
        while True:
            now = self._clock()
            for i, entry in enumerate(self._entries):
                if due[i] <= now:
                    self.slot(entry)
                    while due[i] <= now:  # a slot missed while stopped is not made up
                        due[i] += timedelta(seconds=entry.every_s)
            wait = (min(due) - self._clock()).total_seconds()
            await asyncio.sleep(min(max(wait, 0.0), _MAX_SLEEP_S))

    def slot(self, entry: ScheduledPhase) -> ValidationRun | None:
        """One due slot of ``entry``: the run it started, or None (and why, counted)."""
        if not self._is_leader():
            return None
        if any(r.finished_at is None for r in self._validator.recent()):
            return self._skip(entry, "overlap", "another validation is still running")
        nodes = [n for n in self._state.nodes() if n.connected]
        if not nodes:
            return self._skip(entry, "no_nodes", "no node is connected")
        if entry.idle_only:
            idle = [n for n in nodes if _idle(self._utilization(n), entry.busy_above)]
            if not idle:
                return self._skip(entry, "busy", "no node has every GPU idle")
            nodes = idle
        run = self._validator.start(phases=(entry.phase,), nodes=tuple(n.name for n in nodes))
        self._count(entry.phase, "started")
        log.info(
            "scheduled validation started",
            extra={"phase": entry.phase, "run": run.id, "nodes": len(nodes)},
        )
        return run

    def _skip(self, entry: ScheduledPhase, outcome: str, why: str) -> None:
        self._count(entry.phase, outcome)
        log.info("scheduled validation skipped", extra={"phase": entry.phase, "why": why})
        return None


def first_due(entry: ScheduledPhase, now: datetime) -> datetime:
    """When ``entry`` first runs after ``now``: its next slot of the day's series `at`, `at` +
    every_s, `at` + 2 every_s … (UTC), else one interval from now. Started at 03:30, hourly
    from 02:00 runs at 04:00, not at 02:00 the next day."""
    if entry.at is None:
        return now + timedelta(seconds=entry.every_s)
    at = datetime.combine(now.astimezone(UTC).date(), entry.at, tzinfo=UTC)
    if at > now:
        return at
    every = timedelta(seconds=entry.every_s)
    return at + every * ((now - at) // every + 1)


def busiest_gpu(node: NodeState) -> float | None:
    """The utilisation (0-1) of the node's busiest GPU from its latest sensor report; None
    while any GPU's is unknown (no report, a GPU missing from it, or not supported)."""
    if node.sensors is None:
        return None
    readings = [g.gpu_utilization_ratio for g in node.sensors.gpus]
    if not readings or len(readings) < node.gpu_count() or None in readings:
        return None
    return max(r for r in readings if r is not None)


def _idle(utilization: float | None, busy_above: float) -> bool:
    return utilization is not None and utilization <= busy_above
