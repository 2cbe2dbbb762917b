"""The schema of ``recipes/drift.yaml``: what drift watches and how bad each difference is."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Severity = Literal["critical", "warning", "info"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecipeFact(_Strict):
    """A recipe component whose version a node fact shows."""

    component: str
    fact: str
    same_branch_severity: Severity
    other_branch_severity: Severity
    remediation: str


class ConstraintRule(_Strict):
    severity: Severity
    remediation: str


class BaselineRule(_Strict):
    severity: Severity
    # Fact paths, `[]` standing for any index: `gpus[].vbios_version`.
    paths: tuple[str, ...] = Field(min_length=1)
    remediation: str


class PoolFact(_Strict):
    component: str
    fact: str
    severity: Severity


class PoolRule(_Strict):
    min_nodes: int = Field(ge=2)
    facts: tuple[PoolFact, ...]
    remediation: str


class GpuHealthRule(_Strict):
    """One per-GPU reading: bad when above a number, or below another reading of the GPU."""

    name: str = Field(pattern=r"^[a-z0-9-]+$")
    fact: str
    above: float | None = None
    below: str | None = None
    severity: Severity
    remediation: str

    @model_validator(mode="after")
    def _one_bound(self) -> GpuHealthRule:
        if (self.above is None) == (self.below is None):
            raise ValueError("give exactly one of `above` or `below`")
        return self


class MissingGpus(_Strict):
    severity: Severity
    remediation: str


class HealthRules(_Strict):
    gpus: tuple[GpuHealthRule, ...]
    missing_gpus: MissingGpus


class DriftRules(_Strict):
    kind: Literal["DriftRules"]
    recipe: tuple[RecipeFact, ...]
    constraint: ConstraintRule
    baseline: BaselineRule
    pool: PoolRule
    health: HealthRules
