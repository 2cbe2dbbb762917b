"""What-if: a planned change of component versions, judged on each node's live facts.

The plan's versions are put in place of the node's (``whatif.components`` in
recipes/drift.yaml says which facts each component sets), the node's recipe is resolved again
from the changed facts, and the drift rules that versions move run on it: the recipe's pins
and constraints and the knowledge rules (``evaluate.recipe``, ``evaluate.cited_constraints``),
so drift and what-if share one rule set. Each rule that holds is a decision; the worst decides
the node (``whatif.verdicts``: critical → blocked, warning → review, info → safe), and what
the rules cannot judge (a constraint's fact not reported, a CUDA version or driver branch the
tables lack, an unknown GPU) is a review, never safe.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from plumb.aggregator.drift import evaluate
from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.recipes import Catalog, Resolution, parse_version
from plumb.aggregator.recipes.drift_rules import PlanVerdict as Verdict
from plumb.aggregator.recipes.drift_rules import UnknownCase, WhatIfRules
from plumb.facts import MAX_VALUE_CHARS, Reading

__all__ = [
    "VERDICTS",
    "Decision",
    "NodeAnswer",
    "PoolAnswer",
    "WhatIf",
    "apply_plan",
    "check_plan",
    "judge",
    "summarize",
]

Facts = Mapping[str, Reading]
Plan = Mapping[str, str]  # component name -> planned version
VERDICTS: tuple[Verdict, ...] = ("safe", "review", "blocked")  # mildest first
_RANK = {v: i for i, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class Decision:
    """One rule that holds on the changed node: what it says, where it comes from, the fix.

    ``already``: the rule holds on the live facts too, so the plan does not cause it (it still
    counts: the node after the change is what is judged).
    """

    rule: str
    verdict: Verdict
    severity: str | None  # None for what the rules cannot judge
    reason: str
    source: str
    fix: str
    already: bool = False


@dataclass(frozen=True)
class NodeAnswer:
    """One node's verdict on the plan: what would change, and every rule that decided."""

    node: str
    pool: str
    verdict: Verdict
    # (component, what the node has now, the planned version)
    changes: tuple[tuple[str, str | None, str], ...]
    decisions: tuple[Decision, ...]


@dataclass(frozen=True)
class PoolAnswer:
    """A pool's verdict: its worst node's."""

    pool: str
    verdict: Verdict
    nodes: tuple[NodeAnswer, ...]


@dataclass(frozen=True)
class WhatIf:
    """The whole answer: the plan, the worst verdict, and each pool's."""

    plan: Mapping[str, str]
    verdict: Verdict
    pools: tuple[PoolAnswer, ...]


def check_plan(plan: Plan, rules: WhatIfRules) -> dict[str, str]:
    """The plan, each version stripped; InvalidInput naming an unknown component, a version
    that does not parse, or an empty plan."""
    known = ", ".join(c.name for c in rules.components)
    if not plan:
        raise InvalidInput("the plan names no component", hint=f"give a version of {known}")
    out = {}
    for name, version in plan.items():
        if rules.component(name) is None:
            raise InvalidInput(f"unknown component {name!r}", hint=f"components: {known}")
        text = version.strip()
        if len(text) > MAX_VALUE_CHARS or parse_version(text) is None:
            raise InvalidInput(
                f"{name} version {version[:64]!r} is not a version",
                hint="dot-separated numbers, e.g. 580.95.05, 13.0, 2.27.7, 6.8.0-1030-aws, v1.33.5",
            )
        out[name] = text
    return out


def _paths(facts: Facts, pattern: str) -> list[str]:
    """The node's paths `pattern` names: itself, or each entry's for `x[].leaf`."""
    if "[]" not in pattern:
        return [pattern]
    head, leaf = pattern.split("[]", 1)
    found = re.compile(re.escape(head) + r"\[\d+\]" + re.escape(leaf) + "$")
    return sorted(p for p in facts if found.match(p))


def apply_plan(facts: Facts, plan: Plan, rules: WhatIfRules) -> dict[str, Reading]:
    """`facts` with the plan's versions in place: each component's `facts` on every node (the
    first entry of a repeated one where it reports none), its `with_it` where it reports them."""
    out = dict(facts)
    for name, version in plan.items():
        component = rules.component(name)
        assert component is not None  # check_plan refused it otherwise
        planned = Reading.ok(version)
        for pattern in component.facts:
            paths = _paths(facts, pattern) or [pattern.replace("[]", "[0]")]
            out.update(dict.fromkeys(paths, planned))
        for pattern in component.with_it:
            reported = [p for p in _paths(facts, pattern) if facts[p].status == "ok"]
            out.update(dict.fromkeys(reported, planned))
    return out


def _current(facts: Facts, pattern: str) -> str | None:
    """What the node has now at the component's first fact: distinct values, joined."""
    values = sorted(
        {str(r.value) for p in _paths(facts, pattern) if (r := facts.get(p)) and r.status == "ok"}
    )
    return ", ".join(values) or None


def _decisions(
    facts: Facts, resolution: Resolution, rules: WhatIfRules, catalog: Catalog
) -> list[Decision]:
    """Every rule that holds on a node with these facts and this recipe, as decisions."""
    drift = catalog.drift
    verdicts = rules.verdicts
    pins = [
        Decision(
            f"recipe:{o.component}",
            verdicts[o.severity],
            o.severity,
            f"the recipe pins {o.component} {o.expected}; the node would have {o.observed}",
            f"recipe pin components.{o.component}.version (recipes/drift.yaml `recipe`)",
            o.remediation,
        )
        for o in evaluate.recipe(facts, resolution, drift)
    ]
    cited = [
        Decision(
            c.rule,
            "review" if c.rule in rules.unknown_rules else verdicts[c.observation.severity],
            c.observation.severity,
            _reason(c),
            c.source,
            c.observation.remediation,
        )
        for c in evaluate.cited_constraints(resolution, drift)
    ]
    return pins + cited + _unknowns(resolution, rules, catalog)


def _reason(cited: evaluate.Cited) -> str:
    """A constraint's check and what the node showed; a knowledge finding's message."""
    obs = cited.observation
    if cited.rule.startswith("constraint:"):
        return f"{obs.component}: {obs.observed or obs.expected}"
    return obs.observed


def _unknowns(resolution: Resolution, rules: WhatIfRules, catalog: Catalog) -> list[Decision]:
    """What the rules cannot judge on the node: a review each."""
    cases = rules.unknown
    out = [
        _unknown(
            f"constraint:{c['name']}",
            cases.constraint,
            f"recipe {c['from']}",
            name=str(c["name"]),
            detail=str(c.get("detail") or ""),
        )
        for c in resolution.constraints
        if c.get("status") == "unknown"
    ]
    view = resolution.facts or {}
    for text in view.get("cuda.runtime_version", ()):
        cuda = parse_version(text)
        if cuda is None or cuda.major_minor not in catalog.cuda_driver:
            out.append(_unknown("cuda-runtime-driver", cases.cuda_unlisted, cuda=text))
    driver = parse_version(next(iter(view.get("driver.version", ())), ""))
    judged = any(f.rule == "driver-branch-eol" for f in resolution.findings)
    if driver is not None and driver.branch not in catalog.branches and not judged:
        out.append(
            _unknown(
                "driver-branch-eol", cases.branch_unlisted, branch=driver.branch, driver=driver.text
            )
        )
    return out


def _unknown(rule: str, case: UnknownCase, source: str | None = None, **fields: str) -> Decision:
    cited = source if source is not None else case.source
    assert cited is not None  # drift_rules checks that a case citing no recipe names a source
    return Decision(
        rule,
        "review",
        None,
        case.message.format(**fields),
        cited,
        case.remediation.format(**fields),
    )


def judge(
    node: str,
    pool: str,
    facts: Facts,
    plan: Plan,
    resolve: Callable[[Facts], Resolution],
    catalog: Catalog,
) -> NodeAnswer:
    """The node's verdict on `plan` (checked by `check_plan`), its recipe resolved by
    `resolve` from its facts now and with the plan in place."""
    rules = catalog.drift.whatif
    planned = apply_plan(facts, plan, rules)
    now = {(d.rule, d.verdict) for d in _decisions(facts, resolve(facts), rules, catalog)}
    found = {
        (d.rule, d.reason): d for d in _decisions(planned, resolve(planned), rules, catalog)
    }.values()
    decisions = sorted(
        (replace(d, already=(d.rule, d.verdict) in now) for d in found),
        key=lambda d: (-_RANK[d.verdict], d.rule, d.reason),
    )
    changes = []
    for name, version in plan.items():
        component = rules.component(name)
        assert component is not None
        changes.append((name, _current(facts, component.facts[0]), version))
    return NodeAnswer(
        node,
        pool,
        _worst(d.verdict for d in decisions),
        tuple(changes),
        tuple(decisions),
    )


def summarize(plan: Plan, nodes: Sequence[NodeAnswer]) -> WhatIf:
    """The answer of these nodes' verdicts, by pool and node name."""
    pools: dict[str, list[NodeAnswer]] = {}
    for answer in sorted(nodes, key=lambda a: (a.pool, a.node)):
        pools.setdefault(answer.pool, []).append(answer)
    out = tuple(
        PoolAnswer(pool, _worst(a.verdict for a in members), tuple(members))
        for pool, members in pools.items()
    )
    return WhatIf(dict(plan), _worst(p.verdict for p in out), out)


def _worst(verdicts: Iterable[Verdict]) -> Verdict:
    return max(verdicts, key=_RANK.__getitem__, default="safe")
