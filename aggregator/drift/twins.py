"""Benchmark figures judged against the fleet: baselines learned from twins, and regressions.

A node's twins are the other nodes with its GPU model, GPU count and fabric. From each node's
latest figure of a check, a group's baseline is the median and the median absolute deviation
(a spread one outlier does not move). A node `straggler.below` or more under the median of its
twins (itself left out, so a slow node never pulls down its own yardstick) is a straggler even
when it clears the datasheet fraction; a node whose figure fell `regression.step` or more since
its previous run on the same hardware has regressed, and the caller names the stack changes in
between. Every figure is higher-is-better (throughput, bandwidth). Pure: no store, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median

from plumb.aggregator.drift.model import Observation
from plumb.aggregator.recipes.drift_rules import TwinRules

__all__ = ["FleetBaseline", "Figure", "Step", "learn", "regression", "steps", "stragglers"]

Group = tuple[str, int, str]  # GPU model, GPU count, fabric


@dataclass(frozen=True)
class Figure:
    """One measured figure of one check on one node, and what it was measured on."""

    node: str
    check: str
    value: float
    unit: str
    group: Group
    stack: str  # the stack hash (validation/stack.py)
    at: datetime


@dataclass(frozen=True)
class FleetBaseline:
    """What one group of twins measures on one check: from `twins` nodes' latest figures."""

    model: str
    gpus: int
    fabric: str
    check: str
    unit: str
    twins: int
    median: float
    spread: float  # median absolute deviation from `median`


@dataclass(frozen=True)
class Step:
    """A node's figure that fell between its previous run and its latest."""

    previous: Figure
    latest: Figure

    @property
    def fraction(self) -> float:
        """How far it fell, as a fraction of the previous figure."""
        return 1 - self.latest.value / self.previous.value


def _groups(latest: Iterable[Figure]) -> dict[tuple[Group, str, str], list[Figure]]:
    out: dict[tuple[Group, str, str], list[Figure]] = defaultdict(list)
    for f in latest:
        out[(f.group, f.check, f.unit)].append(f)
    return out


def learn(latest: Iterable[Figure], rules: TwinRules) -> list[FleetBaseline]:
    """Each group's baseline per check, from each node's latest figure; only groups of at
    least `min_twins` nodes, by model, GPU count, fabric and check."""
    out = []
    for (group, check, unit), figures in _groups(latest).items():
        if len(figures) < rules.min_twins:
            continue
        values = [f.value for f in figures]
        mid = median(values)
        out.append(
            FleetBaseline(
                *group,
                check=check,
                unit=unit,
                twins=len(values),
                median=mid,
                spread=median(abs(v - mid) for v in values),
            )
        )
    return sorted(out, key=lambda b: (b.model, b.gpus, b.fabric, b.check))


def stragglers(latest: Iterable[Figure], rules: TwinRules) -> dict[str, list[Observation]]:
    """Straggler observations by node: a latest figure `straggler.below` or more under the
    median of its twins' latest figures, where it has at least `min_twins` twins."""
    rule = rules.straggler
    out: dict[str, list[Observation]] = defaultdict(list)
    for (_, check, unit), figures in _groups(latest).items():
        if len(figures) - 1 < rules.min_twins:
            continue
        ordered = sorted(figures, key=lambda f: f.value)
        values = [f.value for f in ordered]
        for i, f in enumerate(ordered):
            mid = _median_without(values, i)
            if mid <= 0 or f.value > mid * (1 - rule.below):
                continue
            under = 1 - f.value / mid
            twins = len(values) - 1
            out[f.node].append(
                Observation(
                    "straggler",
                    check,
                    f"within {rule.below:.0%} of its twins' median",
                    f"{f.value:.4g} {unit}, {under:.0%} under the median {mid:.4g} {unit} "
                    f"of its {twins} twins ({_group_text(f.group)})",
                    rule.severity,
                    rule.remediation,
                )
            )
    return dict(out)


def _median_without(values: Sequence[float], i: int) -> float:
    """The median of sorted `values` with the one at index `i` left out (O(1))."""
    m = len(values) - 1

    def at(k: int) -> float:
        return values[k] if k < i else values[k + 1]

    return (at((m - 1) // 2) + at(m // 2)) / 2


def steps(previous: Iterable[Figure], latest: Iterable[Figure], rules: TwinRules) -> list[Step]:
    """Each node's figure that fell `regression.step` or more between its previous and its
    latest run of a check, on the same GPU model, count and fabric."""
    before = {(f.node, f.check): f for f in previous}
    out = []
    for f in latest:
        prev = before.get((f.node, f.check))
        if prev is None or prev.group != f.group or prev.unit != f.unit or prev.value <= 0:
            continue
        step = Step(prev, f)
        if step.fraction >= rules.regression.step:
            out.append(step)
    return sorted(out, key=lambda s: (s.latest.node, s.latest.check))


def regression(step: Step, changes: Sequence[str], rules: TwinRules) -> Observation:
    """The regression observation of `step`, naming the stack `changes` between its runs."""
    prev, now = step.previous, step.latest
    after = f"after {'; '.join(changes)}" if changes else "with no stack change between the runs"
    return Observation(
        "regression",
        now.check,
        f"{prev.value:.4g} {prev.unit} as at {prev.at:%Y-%m-%d %H:%M} UTC",
        f"{now.value:.4g} {now.unit} (−{step.fraction:.0%}) at {now.at:%Y-%m-%d %H:%M} UTC, "
        f"{after}",
        rules.regression.severity,
        rules.regression.remediation,
    )


def _group_text(group: Group) -> str:
    model, gpus, fabric = group
    return f"{gpus}x {model}, {fabric}"
