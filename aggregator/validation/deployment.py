"""Deployment checks, instant, in the aggregator: the node's resolved recipe against its facts.

Plumb sees a component's version only where a node fact shows it (the `recipe:` table of
recipes/drift.yaml: driver, CUDA, NCCL, runtime, kubelet...); components no fact shows are
listed as not visible rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from plumb.aggregator.recipes import Catalog, Resolution
from plumb.facts import Reading

__all__ = ["DEPLOYMENT", "Verdict"]

Verdict = tuple[str, str, dict[str, str]]  # status, message, details
Facts = Mapping[str, Reading]


def recipe_components(facts: Facts, resolution: Resolution, catalog: Catalog) -> Verdict:
    """Every recipe component a node fact shows runs at the recipe's version."""
    details: dict[str, str] = {}
    wrong, seen = [], 0
    shown_by = {rule.component: rule.fact for rule in catalog.drift.recipe}
    for component in resolution.components:
        name = str(component["name"])
        expected = component.get("version")
        if not component.get("enabled", True) or not expected:
            continue
        fact = shown_by.get(name)
        reading = facts.get(fact) if fact else None
        if reading is None or reading.status != "ok":
            why = catalog.undetected_components.get(name)
            details[name] = f"{expected}: not visible to Plumb" + (f" ({why})" if why else "")
            continue
        seen += 1
        observed = str(reading.value)
        details[name] = f"{expected}: observed {observed}"
        if observed != str(expected):
            wrong.append(f"{name} {observed}, recipe {expected}")
    if wrong:
        return "fail", "; ".join(wrong), details
    if not seen:
        return "skip", "no recipe component version is visible in this node's facts", details
    hidden = len(details) - seen
    extra = f"; {hidden} not visible to Plumb" if hidden else ""
    return "pass", f"{seen} components at the recipe's version{extra}", details


def recipe_constraints(facts: Facts, resolution: Resolution, catalog: Catalog) -> Verdict:
    """Every recipe constraint holds; known-bad findings of the recipe count as failures."""
    details: dict[str, str] = {}
    failed, unknown = [], []
    for c in resolution.constraints:
        name, status = str(c["name"]), str(c.get("status"))
        details[name] = f"{status}: {c.get('detail') or c.get('check') or ''}"
        if status == "fail":
            failed.append(f"{name} ({c.get('detail')})")
        elif status != "pass":
            unknown.append(name)
    for f in resolution.findings:
        details[f"finding:{f.rule}"] = f"{f.severity}: {f.message}"
        if f.severity == "critical":
            failed.append(f.message)
    if failed:
        return "fail", "; ".join(failed), details
    if unknown:
        return "warn", f"cannot tell: {', '.join(unknown)} not reported by the node", details
    return "pass", f"{len(resolution.constraints)} constraints hold", details


DEPLOYMENT: dict[str, Callable[[Facts, Resolution, Catalog], Verdict]] = {
    "recipe-components": recipe_components,
    "recipe-constraints": recipe_constraints,
}
