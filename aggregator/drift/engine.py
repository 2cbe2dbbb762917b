"""The drift engine: open findings per node, opened and closed as evaluations change.

A finding is keyed by (node, kind, component). Evaluating a node yields its observations;
an observation with no open finding opens one, an open finding no longer observed closes,
and one observed with a different expected/observed/severity closes and reopens, so every
transition is a row with the recipe hash in force at the time. The engine only decides;
the caller persists the transitions it returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from plumb.aggregator.drift import evaluate
from plumb.aggregator.drift.model import DriftFinding, Kind, Observation
from plumb.aggregator.recipes import Resolution
from plumb.aggregator.recipes.drift_rules import DriftRules
from plumb.aggregator.recipes.schema import XidRow
from plumb.facts import Reading, gpu_count

Facts = Mapping[str, Reading]
_NODE_KINDS: frozenset[Kind] = frozenset({"recipe", "constraint", "baseline"})
# What a move of the pool's majority can change: pool findings, and health findings that
# compare a GPU's links with what the pool runs.
_POOL_KINDS: frozenset[Kind] = frozenset({"pool", "health"})
# What only a validation run changes: figures against the node's twins and its last run.
_BENCHMARK_KINDS: frozenset[Kind] = frozenset({"straggler", "regression"})


@dataclass(frozen=True)
class Baseline:
    """A node's accepted stack: the baseline facts and its GPU count."""

    facts: dict[str, Reading]
    gpu_count: int
    accepted_at: datetime


@dataclass(frozen=True)
class Transitions:
    """What one evaluation changed for one node, for the store and the counters."""

    node: str
    opened: tuple[DriftFinding, ...] = ()
    closed: tuple[DriftFinding, ...] = ()
    baseline: Baseline | None = None

    def __bool__(self) -> bool:
        return bool(self.opened or self.closed or self.baseline)


class DriftEngine:
    """Open findings and baselines of every node, in memory; `xids` is the XID table
    (`Catalog.xids`) that grades the XIDs a node's GPUs report."""

    def __init__(
        self,
        rules: DriftRules,
        clock: Callable[[], datetime],
        *,
        xids: Mapping[int, XidRow],
    ):
        self.rules = rules
        self._xids = xids
        self._clock = clock
        self._open: dict[str, dict[tuple[str, str], DriftFinding]] = {}
        self.baselines: dict[str, Baseline] = {}

    def restore(self, findings: Iterable[DriftFinding], baselines: Mapping[str, Baseline]) -> None:
        """Load open findings and baselines from the store, keeping their timestamps."""
        for f in findings:
            self._open.setdefault(f.node, {})[f.key] = f
        self.baselines.update(baselines)

    def open_findings(self, node: str | None = None) -> list[DriftFinding]:
        """Open findings, of one node or all, sorted by node, severity, kind, component."""
        nodes = [node] if node is not None else sorted(self._open)
        rank = {"critical": 0, "warning": 1, "info": 2}
        found = [f for n in nodes for f in self._open.get(n, {}).values()]
        return sorted(found, key=lambda f: (f.node, rank[f.severity], f.kind, f.component))

    def evaluate(
        self, node: str, facts: Facts, resolution: Resolution, majorities: Mapping[str, str]
    ) -> Transitions:
        """Every kind of finding for `node`; its first facts become its baseline."""
        new_baseline = None
        if node not in self.baselines:
            new_baseline = self.accept_baseline(node, facts)
        base = self.baselines[node]
        rules = self.rules
        observations = (
            evaluate.recipe(facts, resolution, rules)
            + evaluate.constraint(resolution, rules)
            + evaluate.baseline(facts, base.facts, rules)
            + evaluate.health(facts, base.facts, base.gpu_count, majorities, rules)
            + evaluate.xids(facts, self._xids, rules)
            + evaluate.pool(facts, majorities, rules)
        )
        result = self._reconcile(
            node, observations, _NODE_KINDS | _POOL_KINDS, resolution.content_hash
        )
        return replace(result, baseline=new_baseline)

    def evaluate_pool(
        self, node: str, facts: Facts, recipe_hash: str, majorities: Mapping[str, str]
    ) -> Transitions:
        """Only the pool and health findings of `node`, after another member of its pool
        changed."""
        base = self.baselines.get(node)
        observations = evaluate.pool(facts, majorities, self.rules) + evaluate.health(
            facts,
            base.facts if base else {},
            base.gpu_count if base else None,
            majorities,
            self.rules,
        )
        observations += evaluate.xids(facts, self._xids, self.rules)  # health, like the above
        return self._reconcile(node, observations, _POOL_KINDS, recipe_hash)

    def evaluate_benchmarks(
        self, node: str, observations: list[Observation], recipe_hash: str
    ) -> Transitions:
        """Only the straggler and regression findings of `node`, from its figures against its
        twins and its previous run (drift/twins.py), after a validation run."""
        return self._reconcile(node, observations, _BENCHMARK_KINDS, recipe_hash)

    def accept_baseline(self, node: str, facts: Facts) -> Baseline:
        """Make the node's current stack its baseline; the next evaluation compares to it."""
        base = Baseline(
            facts=evaluate.baseline_facts(facts, self.rules),
            gpu_count=gpu_count(facts),
            accepted_at=self._clock(),
        )
        self.baselines[node] = base
        return base

    def adopt(self, findings: Iterable[DriftFinding]) -> None:
        """Take the stored copy of open findings this engine also holds, with the same content.

        Another replica may have stored the finding first, with its own id and time; the
        database kept that row, so every replica answers with it.
        """
        for f in findings:
            held = self._open.get(f.node, {}).get(f.key)
            if f.closed_at is None and held is not None and held.id != f.id and held.same_as(f):
                self._open[f.node][f.key] = f

    def forget(self, node: str) -> Transitions:
        """Drop a removed node's baseline, and close its open findings (kept with its history,
        or dropped with it, by the store)."""
        self.baselines.pop(node, None)
        now = self._clock()
        held = self._open.pop(node, {}).values()
        return Transitions(node, closed=tuple(replace(f, closed_at=now) for f in held))

    def _reconcile(
        self,
        node: str,
        observations: list[Observation],
        kinds: frozenset[Kind],
        recipe_hash: str,
    ) -> Transitions:
        now = self._clock()
        current = self._open.setdefault(node, {})
        seen = {obs.key: obs for obs in observations}
        opened, closed = [], []
        for key, finding in list(current.items()):
            obs = seen.get(key)
            if finding.kind in kinds and (obs is None or not finding.same_as(obs)):
                closed.append(replace(finding, closed_at=now))
                del current[key]
        for key, obs in seen.items():
            if key not in current:
                finding = DriftFinding(
                    id=uuid.uuid4().hex,
                    node=node,
                    kind=obs.kind,
                    component=obs.component,
                    expected=obs.expected,
                    observed=obs.observed,
                    severity=obs.severity,
                    # Texts name the node as {node}, so a command in them can be pasted.
                    remediation=obs.remediation.replace("{node}", node),
                    recipe_hash=recipe_hash,
                    opened_at=now,
                )
                current[key] = finding
                opened.append(finding)
        if not current:
            del self._open[node]
        return Transitions(node, tuple(opened), tuple(closed))
