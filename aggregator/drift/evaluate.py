"""Pure evaluation: a node's facts against its recipe, baseline, pool and health rules (the
XIDs its GPUs report among them).

Each function returns the observations of one kind; none keeps state. The engine turns
them into findings that open and close.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from plumb.aggregator.drift.model import Observation
from plumb.aggregator.recipes import Resolution, parse_version
from plumb.aggregator.recipes.drift_rules import DriftRules, PoolRule
from plumb.aggregator.recipes.schema import XidRow
from plumb.aggregator.state.shape import shape
from plumb.aggregator.state.stack import stack_facts
from plumb.aggregator.state.views import gpu_views
from plumb.facts import Reading

Facts = Mapping[str, Reading]


def _value(facts: Facts, path: str) -> str | None:
    reading = facts.get(path)
    return None if reading is None or reading.status != "ok" else str(reading.value)


def recipe(facts: Facts, resolution: Resolution, rules: DriftRules) -> list[Observation]:
    """Components the recipe pins whose observed version differs: ahead, behind, or other."""
    out = []
    owner = resolution.driver_owner.owner if resolution.driver_owner else None
    for rule in rules.recipe:
        if rule.only_when_driver_owner is not None and owner != rule.only_when_driver_owner:
            continue
        component = resolution.component(rule.component)
        observed = _value(facts, rule.fact)
        expected = component.get("version") if component else None
        if component is None or not component.get("enabled", True) or not expected:
            continue
        if observed is None or observed == str(expected):
            continue
        have, want = parse_version(observed), parse_version(str(expected))
        if have is None or want is None or have == want:
            verdict = rule.other
        else:
            verdict = rule.ahead if have > want else rule.behind
        out.append(
            Observation(
                "recipe",
                rule.component,
                str(expected),
                observed,
                verdict.severity,
                verdict.remediation,
            )
        )
    return out


@dataclass(frozen=True)
class Cited:
    """A constraint observation with the rule that made it and where that rule comes from:
    the overlay or mixin that set a recipe constraint, or the table row a knowledge rule read."""

    observation: Observation
    rule: str
    source: str


def constraint(resolution: Resolution, rules: DriftRules) -> list[Observation]:
    """Recipe constraints that fail on the node, and the knowledge rules' findings."""
    return [c.observation for c in cited_constraints(resolution, rules)]


def cited_constraints(resolution: Resolution, rules: DriftRules) -> list[Cited]:
    """`constraint`'s observations, each citing its rule; what-if shows the citations."""
    out = [
        Cited(
            Observation(
                "constraint",
                str(c["name"]),
                str(c.get("check") or ""),
                str(c.get("detail") or ""),
                c.get("severity") or rules.constraint.severity,
                c.get("remediation") or rules.constraint.remediation,
            ),
            f"constraint:{c['name']}",
            f"recipe {c['from']}",
        )
        for c in resolution.constraints
        if c.get("status") == "fail"
    ]
    out += [
        Cited(
            Observation("constraint", f.rule, "", f.message, f.severity, f.remediation),
            f.rule,
            f.source,
        )
        for f in resolution.findings
    ]
    return out


def baseline_facts(facts: Facts, rules: DriftRules) -> dict[str, Reading]:
    """The part of `facts` a baseline keeps: its compared paths, and the per-GPU facts the
    health rules measure against it."""
    patterns = frozenset(rules.baseline.paths) | {
        link_key(r.fact) for r in rules.health.gpus if r.below and "baseline" in r.below
    }
    return {p: facts[p] for p in shape(facts).select(patterns)}


def baseline(facts: Facts, accepted: Facts, rules: DriftRules) -> list[Observation]:
    """Baseline facts that changed, appeared or disappeared since the baseline was accepted."""
    now = stack_facts(facts, rules.baseline.paths)
    kept = stack_facts(accepted, rules.baseline.paths)
    if now == kept:
        return []
    out = []
    for path in sorted(set(now) | set(kept)):
        before, after = kept.get(path), now.get(path)
        if before == after:
            continue
        out.append(
            Observation(
                "baseline",
                path,
                _show(before),
                _show(after),
                rules.baseline.severity,
                rules.baseline.remediation,
            )
        )
    return out


def _show(reading: Reading | None) -> str:
    if reading is None:
        return "(absent)"
    return str(reading.value) if reading.status == "ok" else f"({reading.status})"


class PoolTally:
    """How many members of one pool have each value of each pool fact, kept incrementally.

    A member's change costs O(pool facts), not O(members), so a 10,000-node reconnect storm
    does not re-read every pool mate on every arrival.
    """

    def __init__(self, rule: PoolRule):
        self._rule = rule
        self._members: dict[str, dict[str, str]] = {}
        self._counts: dict[str, Counter[str]] = {f.component: Counter() for f in rule.facts}
        self._counts.update({link_key(fact): Counter() for fact in rule.gpu_links})

    def __len__(self) -> int:
        return len(self._members)

    def add(self, node: str, facts: Facts) -> None:
        """Count `node` with the pool facts it has now (replacing what it had)."""
        self.discard(node)
        values = {f.component: v for f in self._rule.facts if (v := _value(facts, f.fact))}
        values.update(_best_links(facts, self._rule.gpu_links))
        self._members[node] = values
        for component, value in values.items():
            self._counts[component][value] += 1

    def discard(self, node: str) -> None:
        for component, value in self._members.pop(node, {}).items():
            self._counts[component][value] -= 1
            if not self._counts[component][value]:
                del self._counts[component][value]

    def majorities(self) -> dict[str, str]:
        """Per pool fact, the value a strict majority has (none on a tie or a small pool)."""
        members = len(self._members)
        if members < self._rule.min_nodes:
            return {}
        out = {}
        for component, counts in self._counts.items():
            if counts:
                value, n = counts.most_common(1)[0]
                if n * 2 > members:
                    out[component] = value
        return out


def link_key(fact: str) -> str:
    """The majorities key of a per-GPU link fact: ``gpus[].pcie_link_width_current``."""
    return f"gpus[].{fact}"


def _best_links(facts: Facts, links: tuple[str, ...]) -> dict[str, str]:
    """Per link fact, the node's best GPU's value: what its slots and links can run."""
    best: dict[str, float] = {}
    for g in gpu_views(facts):
        for fact in links:
            if (value := g.number(fact)) is not None:
                key = link_key(fact)
                best[key] = max(best.get(key, value), value)
    return {k: f"{v:g}" for k, v in best.items()}


def pool_majorities(members: Iterable[Facts], rule: PoolRule) -> dict[str, str]:
    """The majorities of a pool with these members' facts."""
    tally = PoolTally(rule)
    for i, facts in enumerate(members):
        tally.add(str(i), facts)
    return tally.majorities()


def pool(facts: Facts, majorities: Mapping[str, str], rules: DriftRules) -> list[Observation]:
    """Facts where the node differs from its pool's majority."""
    out = []
    for fact in rules.pool.facts:
        expected = majorities.get(fact.component)
        observed = _value(facts, fact.fact)
        if expected is not None and observed is not None and observed != expected:
            out.append(
                Observation(
                    "pool",
                    fact.component,
                    expected,
                    observed,
                    fact.severity,
                    rules.pool.remediation,
                )
            )
    return out


def health(
    facts: Facts,
    accepted: Facts,
    baseline_gpus: int | None,
    majorities: Mapping[str, str],
    rules: DriftRules,
) -> list[Observation]:
    """Per-GPU readings out of bounds, links below the baseline's or the pool's, and GPUs
    missing against the baseline's count."""
    out = []
    gpus = gpu_views(facts)
    count = len(gpus)
    for g in gpus:
        i = g.index
        for rule in rules.health.gpus:
            value = g.number(rule.fact)
            if value is None:
                continue
            # What was expected is worded only for a finding: nearly every GPU is in bounds.
            if rule.above is not None:
                if value <= rule.above:
                    continue
                expected = f"<= {rule.above:g}"
            else:
                bound = _reference(accepted, majorities, i, rule.fact, rule.below or ())
                if bound is None or value >= bound[0]:
                    continue
                expected = f"{bound[0]:g} ({bound[1]})"
            out.append(
                Observation(
                    "health",
                    f"gpu{i}/{rule.name}",
                    expected,
                    f"{value:g}",
                    rule.severity,
                    rule.remediation,
                )
            )
    if baseline_gpus is not None and count < baseline_gpus:
        missing = rules.health.missing_gpus
        out.append(
            Observation(
                "health",
                "gpus/missing",
                str(baseline_gpus),
                str(count),
                missing.severity,
                missing.remediation,
            )
        )
    return out


def xids(facts: Facts, table: Mapping[int, XidRow], rules: DriftRules) -> list[Observation]:
    """One health observation per GPU and XID code it reports, graded by the XID table."""
    out = []
    for g in gpu_views(facts):
        j = 0
        while (code := g.number(f"xids[{j}].code")) is not None:
            j += 1
            row = table.get(int(code))
            unknown = rules.health.xid.unknown
            meaning, severity, fix = "not in the XID table", unknown.severity, unknown.remediation
            if row is not None:
                meaning, severity = row.meaning, row.severity
                fix = f"{row.action} (NVIDIA: {row.source})"
            out.append(
                Observation(
                    "health",
                    f"gpu{g.index}/xid-{code:g}",
                    "no XID",
                    f"XID {code:g}: {meaning}",
                    severity,
                    fix,
                )
            )
    return out


def _reference(
    accepted: Facts, majorities: Mapping[str, str], index: int, fact: str, refs: Iterable[str]
) -> tuple[float, str] | None:
    """The highest of the GPU's value at the baseline and its pool's usual value, and which
    it is; None when neither is known."""
    found = []
    if "baseline" in refs and (at := _number(accepted, f"gpus[{index}].{fact}")) is not None:
        found.append((at, "baseline"))
    if "pool" in refs and (usual := majorities.get(link_key(fact))) is not None:
        found.append((float(usual), "pool"))
    return max(found) if found else None


def _number(facts: Facts, path: str) -> float | None:
    reading = facts.get(path)
    if reading is None or reading.status != "ok" or isinstance(reading.value, str):
        return None
    return float(reading.value)  # type: ignore[arg-type]
