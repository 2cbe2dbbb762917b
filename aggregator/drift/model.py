"""What drift produces: observations (a difference now) and findings (one with a lifetime)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

# straggler / regression: benchmark figures against the node's twins / its previous run.
Kind = Literal["recipe", "constraint", "baseline", "pool", "health", "straggler", "regression"]
Severity = Literal["critical", "warning", "info"]
KINDS: tuple[Kind, ...] = (
    "recipe",
    "constraint",
    "baseline",
    "pool",
    "health",
    "straggler",
    "regression",
)
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")


@dataclass(frozen=True)
class Observation:
    """A difference between what a node should be and what it is, as evaluated now."""

    kind: Kind
    component: str
    expected: str
    observed: str
    severity: Severity
    remediation: str

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.component


@dataclass(frozen=True)
class DriftFinding:
    """An observation with its lifetime: opened once, closed when it no longer holds."""

    id: str
    node: str
    kind: Kind
    component: str
    expected: str
    observed: str
    severity: Severity
    remediation: str
    # The node's recipe hash when the finding opened: what the recipe said then.
    recipe_hash: str
    opened_at: datetime
    closed_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.component

    def same_as(self, obs: Observation | DriftFinding) -> bool:
        """Whether `obs` is this finding still holding, unchanged."""
        return (self.expected, self.observed, self.severity) == (
            obs.expected,
            obs.observed,
            obs.severity,
        )
