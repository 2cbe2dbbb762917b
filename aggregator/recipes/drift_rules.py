"""The schema of ``recipes/drift.yaml``: what drift watches and how bad each difference is."""

from __future__ import annotations

from string import Formatter
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

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


class Fabric(_Strict):
    """A name for how a node's GPUs talk to each other, where its check holds."""

    name: str = Field(pattern=r"^[a-z0-9-]{1,32}$")  # the store keeps 32 characters
    when: Check


class StragglerRule(_Strict):
    """A figure `below` (a fraction) or more under the median of the node's twins."""

    below: float = Field(gt=0, lt=1)
    severity: Severity
    remediation: str


class RegressionRule(_Strict):
    """A figure `step` (a fraction) or more under the node's own previous figure."""

    step: float = Field(gt=0, lt=1)
    severity: Severity
    remediation: str


class TwinRules(_Strict):
    """Benchmark figures judged against the fleet itself: a node's twins are the other nodes
    with its GPU model, GPU count and fabric."""

    min_twins: int = Field(ge=1)
    # In order: the first whose check holds on the node's facts names its fabric.
    fabrics: tuple[Fabric, ...]
    default_fabric: str = Field(pattern=r"^[a-z0-9-]{1,32}$")
    straggler: StragglerRule
    regression: RegressionRule


class KnowledgeCase(_Strict):
    """One case of a knowledge rule: how bad it is, and its finding's texts as templates."""

    severity: Severity
    message: str
    remediation: str
    # Only where the rule reads no table row; a row's own source is cited otherwise.
    source: str | None = None


# Per case of the knowledge rules (aggregator/recipes/knowledge.py): the template names the
# rule fills, and whether it cites the table row it read (else the case names its source).
CASE_FIELDS: dict[str, tuple[frozenset[str], bool]] = {
    "cuda_runtime_below_mvc": (
        frozenset({"runtime", "driver", "min_driver_mvc", "min_driver_full"}),
        True,
    ),
    "cuda_runtime_below_full": (
        frozenset({"runtime", "driver", "min_driver_mvc", "min_driver_full"}),
        True,
    ),
    "gpu_below_minimum": (frozenset({"model", "min_driver", "driver"}), True),
    "branch_past_eol": (frozenset({"branch", "driver", "when"}), True),
    "branch_new_feature": (frozenset({"branch", "driver"}), True),
    "branch_unlisted_past_eol": (frozenset({"branch", "driver", "long_term", "when"}), False),
    "fabric_manager_missing": (frozenset({"evidence", "status", "driver"}), False),
    "fabric_manager_mismatch": (frozenset({"fabric_manager", "driver"}), False),
    "kernel_module_mismatch": (frozenset({"module", "driver"}), False),
    "unknown_gpu": (frozenset({"gpu"}), False),
}


def _placeholders(template: str) -> set[str]:
    """The ``{name}`` fields of a str.format template; raises ValueError on a malformed one."""
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


def _check_templates(message: str, remediation: str, fields: frozenset[str]) -> None:
    """Raise ValueError unless both templates parse and fill only ``fields``."""
    for key, template in (("message", message), ("remediation", remediation)):
        try:
            unknown = _placeholders(template) - fields
        except ValueError as exc:
            raise ValueError(f"{key}: not a template ({exc})") from exc
        if unknown:
            raise ValueError(
                f"{key}: unknown placeholder {{{min(unknown)}}}; this case fills "
                + ", ".join(f"{{{f}}}" for f in sorted(fields))
            )


class KnowledgeCases(_Strict):
    cuda_runtime_below_mvc: KnowledgeCase
    cuda_runtime_below_full: KnowledgeCase
    gpu_below_minimum: KnowledgeCase
    branch_past_eol: KnowledgeCase
    branch_new_feature: KnowledgeCase
    branch_unlisted_past_eol: KnowledgeCase
    fabric_manager_missing: KnowledgeCase
    fabric_manager_mismatch: KnowledgeCase
    kernel_module_mismatch: KnowledgeCase
    unknown_gpu: KnowledgeCase

    @field_validator("*")
    @classmethod
    def _fills(cls, case: KnowledgeCase, info: ValidationInfo) -> KnowledgeCase:
        fields, from_row = CASE_FIELDS[str(info.field_name)]
        _check_templates(case.message, case.remediation, fields)
        if from_row and case.source is not None:
            raise ValueError("source: this case cites the table row it read; give none")
        if not from_row and not case.source:
            raise ValueError("source: this case reads no table row, so it names its source")
        return case


class KnowledgeRules(_Strict):
    cases: KnowledgeCases
    # The node's own facts that show an NVSwitch fabric; fabric-manager rules apply only then.
    fabric_evidence: Check
    # A fabric trained on every GPU: fabric manager ran, so not seeing it is no fault.
    fabric_trained: Check


PlanVerdict = Literal["safe", "review", "blocked"]
# A fact path a plan sets: `driver.driver_version`, or `nccl.libraries[].version` for each entry.
_PLAN_FACT = r"^[a-z_]+(\.[a-z_]+|\[\]\.[a-z_]+)+$"


class PlanComponent(_Strict):
    """A component a what-if plan may name, and the facts its version sets."""

    name: str = Field(pattern=r"^[a-z0-9-]+$")
    facts: tuple[Annotated[str, Field(pattern=_PLAN_FACT)], ...] = Field(min_length=1)
    with_it: tuple[Annotated[str, Field(pattern=_PLAN_FACT)], ...] = ()


class UnknownCase(_Strict):
    """What the rules cannot judge on a changed node: a review, with its texts as templates."""

    message: str
    remediation: str
    source: str | None = None


# Per unknown case of what-if (aggregator/drift/whatif.py): the template names it fills, and
# whether it cites the recipe constraint it read (else the case names its source).
UNKNOWN_FIELDS: dict[str, tuple[frozenset[str], bool]] = {
    "constraint": (frozenset({"name", "detail"}), True),
    "cuda_unlisted": (frozenset({"cuda"}), False),
    "branch_unlisted": (frozenset({"branch", "driver"}), False),
}


class UnknownCases(_Strict):
    constraint: UnknownCase
    cuda_unlisted: UnknownCase
    branch_unlisted: UnknownCase

    @field_validator("*")
    @classmethod
    def _fills(cls, case: UnknownCase, info: ValidationInfo) -> UnknownCase:
        fields, from_recipe = UNKNOWN_FIELDS[str(info.field_name)]
        _check_templates(case.message, case.remediation, fields)
        if from_recipe == (case.source is not None):
            raise ValueError(
                "source: give none, the recipe constraint is cited"
                if from_recipe
                else "source: this case reads no recipe, so it names its source"
            )
        return case


class WhatIfRules(_Strict):
    """How a planned change is judged: severity to verdict, the components, the unknowns."""

    verdicts: dict[Severity, PlanVerdict]
    unknown_rules: tuple[str, ...] = ()
    components: tuple[PlanComponent, ...] = Field(min_length=1)
    unknown: UnknownCases

    @model_validator(mode="after")
    def _complete(self) -> WhatIfRules:
        missing = sorted(set(Severity.__args__) - set(self.verdicts))  # type: ignore[attr-defined]
        if missing:
            raise ValueError(f"verdicts: give one for {', '.join(missing)}")
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise ValueError("components: each name once")
        return self

    def component(self, name: str) -> PlanComponent | None:
        """The plan component called ``name``, if there is one."""
        return next((c for c in self.components if c.name == name), None)


class OwnerRule(_Strict):
    owner: DriverOwner
    when: Check
    reason: str


class DriverOwnership(_Strict):
    """Who installs a node's driver: a recipe deploying none of the `deployed_by` groups (each
    a set of components that together install it) leaves it to the host; otherwise inferred
    from facts, the first rule that holds wins."""

    deployed_by: tuple[tuple[str, ...], ...]
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
    whatif: WhatIfRules
    driver_owner: DriverOwnership
    twins: TwinRules

    @model_validator(mode="after")
    def _pool_links_kept(self) -> DriftRules:
        missing = sorted(
            {r.fact for r in self.health.gpus if r.below and "pool" in r.below}
            - set(self.pool.gpu_links)
        )
        if missing:
            raise ValueError(f"pool.gpu_links must list {', '.join(missing)} (health rules)")
        return self
