"""Evaluation of checks (constraints, known-bad conditions) against a node's facts.

Three outcomes: ``pass``, ``fail``, and ``unknown`` when a fact the check needs was not
reported. Only ``fail`` excludes an overlay; ``unknown`` is reported and never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.recipes.schema import Check
from plumb.aggregator.recipes.versions import Expression

__all__ = ["Outcome", "evaluate"]

Status = Literal["pass", "fail", "unknown"]


@dataclass(frozen=True)
class Outcome:
    """The result of one check, with a sentence saying what was observed."""

    status: Status
    detail: str


def evaluate(check: Check, view: NodeView) -> Outcome:
    """Evaluate ``check`` against ``view``."""
    if check.fact is not None and check.value is not None:
        return _evaluate_fact(check.fact, check.value, check.quantifier, view)
    parts = [evaluate(c, view) for c in (check.all_of or check.any_of or ())]
    statuses = {p.status for p in parts}
    if check.all_of is not None:
        status: Status = (
            "fail" if "fail" in statuses else "unknown" if "unknown" in statuses else "pass"
        )
        joiner = " and "
    else:
        status = "pass" if "pass" in statuses else "unknown" if "unknown" in statuses else "fail"
        joiner = " or "
    return Outcome(status, "(" + joiner.join(p.detail for p in parts) + ")")


def _evaluate_fact(fact: str, value: str, quantifier: str, view: NodeView) -> Outcome:
    observed = view.get(fact)
    if not observed:
        return Outcome("unknown", f"{fact} not reported ({view.status(fact)}), needs {value}")
    expression = Expression.parse(value)
    results = [expression.holds(v) for v in observed]
    ok = all(results) if quantifier == "all" else any(results)
    shown = ", ".join(observed)
    return Outcome("pass" if ok else "fail", f"{fact} = {shown}, needs {value}")
