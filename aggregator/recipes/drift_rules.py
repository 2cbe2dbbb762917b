"""The schema of ``recipes/drift.yaml``: what drift watches and how bad each difference is."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plumb.aggregator.recipes.schema import Check

Severity = Literal["critical", "warning", "info"]
DriverOwner = Literal["operator", "host"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Verdict(_Strict):
    """How bad one kind of difference is, and what to do about it."""

    severity: Severity
    remediation: str


class RecipeFact(_Strict):
    """A recipe component whose version a node fact shows.

    The node may be ahead of the recipe, behind it, or show versions that do not compare
    (several at once, or not a version). Being below a minimum is the knowledge rules' and the
    constraints' business; this only says that the node and its recipe disagree.
    """

    component: str
    fact: str
    ahead: Verdict
    behind: Verdict
    other: Verdict
    # Compared with the recipe's pin only where this owner installs the driver; elsewhere the
    # recipe's constraints and the knowledge rules judge the version by its range.
    only_when_driver_owner: DriverOwner | None = None


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
    # Per-GPU link facts the pool keeps a usual value of (each member's best GPU, then the
    # majority of members), for the health rules that compare with the pool.
    gpu_links: tuple[str, ...] = ()
    remediation: str


class GpuHealthRule(_Strict):
    """One per-GPU reading: bad above a number, or below what the node had or its pool runs.

    ``below`` compares with the same fact at the node's accepted baseline and with the usual
    value of its pool, never with the GPU's datasheet maximum: a cloud shape's x8 slot is its
    normal, while a drop from x16 to x4 is a fault.
    """

    name: str = Field(pattern=r"^[a-z0-9-]+$")
    fact: str
    above: float | None = None
    below: tuple[Literal["baseline", "pool"], ...] | None = None
    severity: Severity
    remediation: str

    @model_validator(mode="after")
    def _one_bound(self) -> GpuHealthRule:
        if (self.above is None) == (self.below is None):
            raise ValueError("give exactly one of `above` or `below`")
        if self.below is not None and not self.below:
            raise ValueError("`below` names at least one of baseline, pool")
        return self


class MissingGpus(_Strict):
    severity: Severity
    remediation: str


class XidRule(_Strict):
    """XIDs a GPU reported: the XID table grades known codes; `unknown` grades the rest."""

    unknown: Verdict


class HealthRules(_Strict):
    gpus: tuple[GpuHealthRule, ...]
    missing_gpus: MissingGpus
    xid: XidRule


class KnowledgeSeverities(_Strict):
    """The severity of each case of the knowledge rules (aggregator/recipes/knowledge.py)."""

    cuda_runtime_below_mvc: Severity
    cuda_runtime_below_full: Severity
    gpu_below_minimum: Severity
    branch_past_eol: Severity
    branch_new_feature: Severity
    fabric_manager_missing: Severity
    fabric_manager_mismatch: Severity
    kernel_module_mismatch: Severity
    unknown_gpu: Severity


class KnowledgeRules(_Strict):
    severities: KnowledgeSeverities
    # The node's own facts that show an NVSwitch fabric; fabric-manager rules apply only then.
    fabric_evidence: Check


class OwnerRule(_Strict):
    owner: DriverOwner
    when: Check
    reason: str


class DriverOwnership(_Strict):
    """Who installs a node's driver, inferred from facts: the first rule that holds wins."""

    rules: tuple[OwnerRule, ...]
    default: DriverOwner
    default_reason: str


class DriftRules(_Strict):
    kind: Literal["DriftRules"]
    recipe: tuple[RecipeFact, ...]
    constraint: ConstraintRule
    baseline: BaselineRule
    pool: PoolRule
    health: HealthRules
    knowledge: KnowledgeRules
    driver_owner: DriverOwnership

    @model_validator(mode="after")
    def _pool_links_kept(self) -> DriftRules:
        missing = sorted(
            {r.fact for r in self.health.gpus if r.below and "pool" in r.below}
            - set(self.pool.gpu_links)
        )
        if missing:
            raise ValueError(f"pool.gpu_links must list {', '.join(missing)} (health rules)")
        return self
