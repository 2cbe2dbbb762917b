"""Baselines learned from the fleet, and the findings they give after each validation run.

Once a finished run is stored, every node's two newest figures of each check are read back
with the stack each was measured on. The latest ones give each twin group's baseline and the
stragglers among them (drift/twins.py); a step down from the previous one is a regression,
named with the stack changes the fleet timeline (timeline.py) holds between the two runs:
"−18 % … after nccl.libraries[*].version 2.27.7 → 2.28.3". The findings go in through the
intake, like every other verdict, so /v1/drift, the metrics and the store see them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from plumb.aggregator.drift import Observation
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.drift.twins import Figure, FleetBaseline, Step, learn, regression, steps
from plumb.aggregator.drift.twins import stragglers as find_stragglers
from plumb.aggregator.intake.intake import Intake
from plumb.aggregator.recipes.drift_rules import DriftRules
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.store import Store, StoreError, Writer
from plumb.aggregator.timeline import ChangeEvent, group_changes
from plumb.aggregator.validation import CheckResult
from plumb.facts import unindexed

__all__ = ["FleetBaselines"]

log = logging.getLogger(__name__)

# As GET /v1/changes groups by default: one rollout wave is one event.
_GAP = timedelta(minutes=30)
# The most fact-change rows one regression window reads (Core.changes reads as many).
_TIMELINE_ROWS = 200_000


@dataclass(frozen=True)
class _Graded:
    latest: list[Figure]
    stragglers: dict[str, list[Observation]]
    steps: list[Step]


class FleetBaselines:
    """Learns twin baselines from the stored figures and keeps the findings they give."""

    def __init__(
        self,
        store: Store,
        writer: Writer,
        state: LiveState,
        intake: Intake,
        evaluator: Evaluator,
        rules: DriftRules,
    ):
        self._store = store
        self._writer = writer
        self._state = state
        self._intake = intake
        self._evaluator = evaluator
        self._rules = rules
        self._lock = asyncio.Lock()  # one regrade at a time: each reads all it decides from

    async def baselines(self) -> list[FleetBaseline]:
        """Each twin group's baseline per check, from the known nodes' latest figures;
        StoreError when the database cannot be read."""
        graded = await asyncio.to_thread(self._grade, self._known())
        return learn(graded.latest, self._rules.twins)

    async def regrade(self) -> None:
        """Open and close every node's straggler and regression findings from the stored
        figures; called once a finished run is stored. A database that cannot be read leaves
        the findings as they are until the next run."""
        async with self._lock:
            try:
                graded = await asyncio.to_thread(self._grade, self._known())
                named = await self._changes(graded.steps)
            except (StoreError, TimeoutError) as exc:
                log.warning("benchmark findings not regraded", extra={"error": str(exc)})
                return
            found = {node: list(obs) for node, obs in graded.stragglers.items()}
            for step in graded.steps:
                found.setdefault(step.latest.node, []).append(
                    regression(step, named.get(id(step), ()), self._rules.twins)
                )
            self._intake.benchmark_findings(found)

    def _known(self) -> frozenset[str]:
        return frozenset(n.name for n in self._state.nodes())

    def _grade(self, known: frozenset[str]) -> _Graded:
        """Read the figures and judge them (in a thread: pure work over many rows)."""
        latest, previous = [], []
        for r in self._store.figures(per=2):
            if r.node not in known:
                continue
            figure = _figure(r)
            same = latest and (latest[-1].node, latest[-1].check) == (figure.node, figure.check)
            (previous if same else latest).append(figure)
        rules = self._rules.twins
        return _Graded(latest, find_stragglers(latest, rules), steps(previous, latest, rules))

    async def _changes(self, found: Sequence[Step]) -> dict[int, tuple[str, ...]]:
        """The stack changes of each step's node between its two runs, by id of the step."""
        if not found:
            return {}
        since = min(s.previous.at for s in found)
        until = max(s.latest.at for s in found)
        await self._writer.flush()
        rows = await asyncio.to_thread(
            self._store.fleet_history, since, until, None, _TIMELINE_ROWS + 1
        )
        if len(rows) > _TIMELINE_ROWS:
            log.warning("regression window truncated", extra={"rows": len(rows)})
        paths = set(self._rules.baseline.paths)
        stack_rows = [(n, e) for n, e in rows if unindexed(e.path) in paths]
        pools = self._evaluator.pools
        pool_of = {name: p for p, names in pools.items() for name in names}
        sizes = {p: len(names) for p, names in pools.items()}
        events = group_changes(stack_rows, pool_of, sizes, (), (), gap=_GAP)
        return {id(s): _between(s, events) for s in found}


def _between(step: Step, events: Sequence[ChangeEvent]) -> tuple[str, ...]:
    """The events of the step's node that overlap the time between its two runs, oldest
    first, as text."""
    node, start, end = step.latest.node, step.previous.at, step.latest.at
    hits = [e for e in events if node in e.nodes and e.started_at <= end and e.ended_at >= start]
    return tuple(
        f"{e.fact} {e.old or '(none)'} → {e.new or '(none)'}"
        for e in sorted(hits, key=lambda e: (e.started_at, e.fact))
    )


def _figure(r: CheckResult) -> Figure:
    assert r.stack is not None and r.value is not None and r.finished_at is not None
    return Figure(r.node, r.check_id, r.value, r.unit, r.stack.group, r.stack.hash, r.finished_at)
