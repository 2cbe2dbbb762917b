"""Pydantic models of every file under ``recipes/``: unknown keys are errors, models are frozen.

Cross-file rules (a parent overlay exists, a component is registered, no dependency cycle)
are checked by ``catalog``; these models check one document at a time.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from plumb.aggregator.recipes.node import FACT_NAMES
from plumb.aggregator.recipes.versions import Expression, parse_version

Severity = Literal["critical", "warning", "info"]
Name = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", max_length=63)


def _plural_dot_group(crds: tuple[str, ...]) -> tuple[str, ...]:
    """CRD names as `kubectl get crd` gives them, or ValueError naming the bad ones."""
    bad = [c for c in crds if "." not in c]
    if bad:
        raise ValueError(f"a CRD is named <plural>.<group>: {bad}")
    return crds


class Strict(BaseModel):
    """Base of every recipe model: no unknown keys, immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Check(Strict):
    """A test over facts: ``fact`` + ``value`` expression, or ``all_of`` / ``any_of`` checks.

    A multi-valued fact (``gpu.product``, ``cuda.runtime_version``) holds when every value
    satisfies the expression, or any value with ``quantifier: any``.
    """

    fact: str | None = None
    value: str | None = None
    quantifier: Literal["all", "any"] = "all"
    all_of: tuple[Check, ...] | None = None
    any_of: tuple[Check, ...] | None = None

    @field_validator("fact")
    @classmethod
    def _known_fact(cls, fact: str | None) -> str | None:
        if fact is not None and fact not in FACT_NAMES:
            raise ValueError(f"unknown fact {fact!r}; known: {', '.join(sorted(FACT_NAMES))}")
        return fact

    @field_validator("value", mode="before")
    @classmethod
    def _expression(cls, value: Any) -> Any:
        if value is not None:
            Expression.parse(str(value))
            return str(value)
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Check:
        forms = [self.fact is not None, self.all_of is not None, self.any_of is not None]
        if sum(forms) != 1:
            raise ValueError("a check needs exactly one of fact, all_of, any_of")
        if (self.fact is None) != (self.value is None):
            raise ValueError("fact and value go together")
        return self


class Constraint(Check):
    """A named check an overlay needs from the node; merged by name."""

    name: str = Name
    severity: Severity = "critical"
    remediation: str | None = None


class ComponentPatch(Strict):
    """What one overlay says about one component; unset fields inherit."""

    name: str = Name
    version: str | None = None
    namespace: str | None = None
    enabled: bool | None = None
    values: dict[str, Any] | None = None
    dependencies: tuple[str, ...] | None = None


class Placement(Strict):
    """Value paths (dotted) where a bundle puts a node selector and tolerations."""

    node_selector_paths: tuple[str, ...] = ()
    toleration_paths: tuple[str, ...] = ()


class NodeScheduling(Strict):
    """Where a chart takes placement for its system pods and for its pods on GPU nodes, and
    the expected GPU node count (a bundle's ``--nodes``)."""

    system: Placement = Placement()
    accelerated: Placement = Placement()
    node_count_paths: tuple[str, ...] = ()


class RegistryComponent(Strict):
    """One deployable component, or an ``operand`` (a setting of another component's chart)."""

    name: str = Name
    type: Literal["helm", "manifest", "operand"]
    description: str
    source: str | None = None
    chart: str | None = None
    version: str | None = None
    namespace: str | None = None
    dependencies: tuple[str, ...] = ()
    operand_of: str | None = None
    values_key: str | None = None
    node_scheduling: NodeScheduling = NodeScheduling()
    storage_class_paths: tuple[str, ...] = ()  # where a bundle's --storage-class goes
    # CRDs (<plural>.<group>) a manifest's custom resources need: another component's operator
    # installs them later (OLM), so a bundle waits until they are established before applying.
    crds: tuple[str, ...] = ()

    @field_validator("crds")
    @classmethod
    def _crd_names(cls, crds: tuple[str, ...]) -> tuple[str, ...]:
        return _plural_dot_group(crds)

    @model_validator(mode="after")
    def _fields_for_type(self) -> RegistryComponent:
        need = {
            "helm": ("source", "chart", "version", "namespace"),
            "manifest": ("source", "namespace"),
            "operand": ("operand_of", "values_key", "version"),
        }[self.type]
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a {self.type} component needs {', '.join(missing)}")
        return self


class Registry(Strict):
    """``registry.yaml``: the component catalog."""

    kind: Literal["ComponentRegistry"]
    components: tuple[RegistryComponent, ...]


class CriteriaSpec(Strict):
    """The criteria an overlay applies to; ``any`` (or 0 nodes) matches every query."""

    service: str = "any"
    accelerator: str = "any"
    os: str = "any"
    intent: str = "any"
    platform: str = "any"
    nodes: int = Field(default=0, ge=0)


class Overlay(Strict):
    """One file of ``overlays/``: a layer with one parent (``base`` has none)."""

    kind: Literal["Overlay"]
    name: str = Name
    description: str
    base: str | None = "base"
    criteria: CriteriaSpec = CriteriaSpec()
    mixins: tuple[str, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    components: tuple[ComponentPatch, ...] = ()


class PlatformHealth(Strict):
    """What a platform mixin's deployment looks like when healthy (the platform-health check):
    every Deployment of each ``operators`` release (Helm's ``app.kubernetes.io/instance``
    label, in the component's namespace) available, every CRD of ``crds`` served."""

    operators: tuple[str, ...] = ()  # component names: the bundle's Helm release names
    crds: tuple[str, ...] = ()  # <plural>.<group>, as `kubectl get crd` names them

    @field_validator("crds")
    @classmethod
    def _crd_names(cls, crds: tuple[str, ...]) -> tuple[str, ...]:
        return _plural_dot_group(crds)


class Mixin(Strict):
    """One file of ``mixins/``: constraints and components shared by overlays that name it."""

    kind: Literal["Mixin"]
    name: str = Name
    description: str
    constraints: tuple[Constraint, ...] = ()
    components: tuple[ComponentPatch, ...] = ()
    health: PlatformHealth | None = None


class CriteriaValues(Strict):
    """``criteria.yaml``: allowed criteria values and how facts map onto them."""

    kind: Literal["CriteriaValues"]
    service: tuple[str, ...]
    os: tuple[str, ...]
    intent: tuple[str, ...]
    platform: tuple[str, ...]
    service_by_provider: dict[str, str]
    service_by_instance_prefix: dict[str, str]
    fallback_service: str
    os_by_id: dict[str, str]
    # Values AICR takes that these recipes refuse, each with the reason: {key: {value: why}}.
    refused: dict[
        Literal["service", "accelerator", "os", "intent", "platform"], dict[str, str]
    ] = {}


class Sourced(Strict):
    """A knowledge row: every one says where it comes from."""

    source: str = Field(min_length=8)


def _version(text: Any) -> str:
    if parse_version(str(text)) is None:
        raise ValueError(f"not a version: {text!r}")
    return str(text)


class _Versioned(Sourced):
    """A row whose version fields (``version_fields``) must parse; YAML numbers become text."""

    version_fields: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _versions(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in cls.version_fields:
                if key in data and data[key] is not None:
                    data[key] = _version(data[key])
        return data


class CudaDriverRow(_Versioned):
    """CUDA major.minor → minimum driver for the full feature set and under MVC."""

    cuda: str
    min_driver_full: str
    min_driver_mvc: str

    version_fields: ClassVar[tuple[str, ...]] = ("cuda", "min_driver_full", "min_driver_mvc")


class DriverBranchRow(_Versioned):
    """A driver branch's lifecycle; ``eol`` is ``YYYY-MM``, ``past`` (date unknown) or none."""

    branch: str = Field(pattern=r"^\d+$")
    type: Literal["new_feature", "production", "long_term", "developer"]
    eol: str | None = Field(default=None, pattern=r"^(\d{4}-\d{2}|past)$")
    max_cuda: str | None = None

    version_fields: ClassVar[tuple[str, ...]] = ("max_cuda",)


PEAK_FIGURES = ("peak_memory_bandwidth_tbps", "bf16_dense_tflops", "nvlink_bandwidth_gbps")


class GpuRow(_Versioned):
    """One GPU model: how the driver names it, what it needs, and its peak figures.

    A GPU is found by PCI device id first (``pci_device_ids``; empty where no id is certain),
    then by NVML name. A peak figure left null says why in ``peaks_unknown``.
    """

    model: str
    accelerator: str = Name
    nvml_names: tuple[str, ...] = Field(min_length=1)
    pci_device_ids: tuple[str, ...] = ()
    architecture: str
    compute_capability: str
    memory_gb: float
    min_driver: str
    min_cuda: str
    peak_memory_bandwidth_tbps: float | None = None
    bf16_dense_tflops: float | None = None
    nvlink_bandwidth_gbps: float | None = None
    peaks_unknown: dict[str, str] = {}

    version_fields: ClassVar[tuple[str, ...]] = ("min_driver", "min_cuda", "compute_capability")

    @field_validator("pci_device_ids")
    @classmethod
    def _hex(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        for pci in ids:
            if not (len(pci) == 4 and all(c in "0123456789abcdef" for c in pci)):
                raise ValueError(f"PCI device id must be 4 lowercase hex digits, got {pci!r}")
        return ids

    @model_validator(mode="after")
    def _null_peaks_say_why(self) -> GpuRow:
        for name in PEAK_FIGURES:
            value, why = getattr(self, name), self.peaks_unknown.get(name)
            if value is None and not why:
                raise ValueError(f"{name} is null: give the reason in peaks_unknown.{name}")
            if value is not None and why:
                raise ValueError(f"{name} has a value and a reason it is unknown")
        extra = sorted(set(self.peaks_unknown) - set(PEAK_FIGURES))
        if extra:
            raise ValueError(f"peaks_unknown names no peak figure: {', '.join(extra)}")
        return self


class KnownBadRow(Sourced):
    """A combination known to break, detected by ``when`` over the node's facts."""

    name: str = Name
    when: Check
    severity: Severity
    effect: str
    remediation: str


class CudaDriverTable(Strict):
    kind: Literal["CudaDriverTable"]
    rows: tuple[CudaDriverRow, ...]


class DriverBranchTable(Strict):
    kind: Literal["DriverBranchTable"]
    rows: tuple[DriverBranchRow, ...]


class GpuTable(Strict):
    kind: Literal["GpuTable"]
    rows: tuple[GpuRow, ...]


class KnownBadTable(Strict):
    kind: Literal["KnownBadTable"]
    rows: tuple[KnownBadRow, ...]


class XidRow(Sourced):
    """One NVIDIA XID code: what the driver reports, how much it matters, what to do.

    `severity` follows DESIGN's drift table: critical when the GPU is lost or its memory can
    no longer be trusted, warning when it is degraded or needs a reset, info when the cause is
    usually the application (or the event only follows another XID).
    """

    code: int = Field(ge=1, le=65535)
    meaning: str = Field(min_length=3)
    severity: Severity
    action: str = Field(min_length=3)


class XidTable(Strict):
    kind: Literal["XidTable"]
    rows: tuple[XidRow, ...]


class ComponentImageRow(Strict):
    """Container images that show a registry component running, and how a tag gives its version.

    `images` are repository names without registry host or tag (`k8s-device-plugin`, or a
    longer suffix such as `k8s/dcgm-exporter`), so mirrors and private registries match too.
    """

    component: str = Name
    images: tuple[str, ...] = Field(min_length=1)
    # The first group of this pattern, matched at the tag's start, is the version as the
    # registry writes it (tags carry OS suffixes and a `v` that some registry versions lack).
    version_pattern: str = r"(v?\d+(?:\.\d+)*)"
    source: str

    @field_validator("version_pattern")
    @classmethod
    def _one_group(cls, pattern: str) -> str:
        try:
            groups = re.compile(pattern).groups
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        if groups < 1:
            raise ValueError("needs a group that captures the version")
        return pattern


class UndetectedComponent(Strict):
    """A registry component no image row covers, and why: no workload image, or none whose tag
    is the version registry.yaml writes, so discovery would report a false difference."""

    component: str = Name
    reason: str = Field(min_length=1)


class ComponentImageTable(Strict):
    kind: Literal["ComponentImageTable"]
    rows: tuple[ComponentImageRow, ...]
    undetected: tuple[UndetectedComponent, ...] = ()
