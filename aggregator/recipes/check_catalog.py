"""The schema of ``recipes/checks/*.yaml``: every validation check Plumb knows, as data.

A check has an id, a phase, where it runs, a severity, a timeout, parameters passed to the
node, and a remediation. A benchmark's pass mark is a fraction of a peak figure, taken from
the GPU catalog (``recipes/knowledge/gpus.yaml``) or, for host<->device copies, from the
GPU's own PCIe link; never one number for every SKU. A check marked `exclusive: gpus` needs
every GPU of the nodes it runs on to itself: the orchestrator never runs two such checks on one
node at once (validation/exclusive.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CheckDef", "CheckFile", "Checks", "Exclusive", "Minimum", "Threshold"]

Phase = Literal["deployment", "conformance", "performance"]
PHASES: tuple[Phase, ...] = ("deployment", "conformance", "performance")
RunsOn = Literal["aggregator", "agent", "kubernetes", "prometheus"]
Severity = Literal["critical", "warning", "info"]
# What a check needs to itself on its nodes while it runs: `gpus`, every GPU (a benchmark, or
# a workload asking for all of a node's GPUs); two such checks never overlap on a node.
Exclusive = Literal["gpus"]
# GPU catalog columns a threshold may use, plus the GPU's PCIe link at its maximum.
Peak = Literal[
    "bf16_dense_tflops", "peak_memory_bandwidth_tbps", "nvlink_bandwidth_gbps", "pcie_link"
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Threshold(_Strict):
    """Pass when the measured figure is at least ``fraction`` x ``scale`` x the peak."""

    peak: Peak
    fraction: float = Field(gt=0, le=1)
    # Converts the peak into the measured unit: TB/s -> GB/s is 1000; NVLink's bidirectional
    # figure -> one direction (what bus bandwidth measures) is 0.5.
    scale: float = Field(1.0, gt=0)
    unit: str


class Minimum(_Strict):
    """A measured pass mark for one GPU model on one fabric, where no datasheet fraction fits
    (a figure across nodes depends on the network as much as on the GPU)."""

    model: str  # the GPU catalog's model (recipes/knowledge/gpus.yaml)
    fabric: str  # a twin fabric of recipes/drift.yaml (nvswitch, nvlink, pcie)
    gpus: int | None = Field(None, ge=1)  # GPUs per node the mark holds for; None: any count
    value: float = Field(gt=0)
    unit: str
    source: str = Field(min_length=3)


class CheckDef(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    phase: Phase
    runs_on: RunsOn
    severity: Severity
    timeout_s: float = Field(gt=0, le=3600)
    description: str
    remediation: str
    # Passed to the node as strings (matrix_size, bytes, iterations...).
    parameters: dict[str, str | int | float] = {}
    threshold: Threshold | None = None
    minima: tuple[Minimum, ...] = ()
    exclusive: Exclusive | None = None

    @model_validator(mode="after")
    def _placement(self) -> CheckDef:
        if self.phase == "deployment" and self.runs_on != "aggregator":
            raise ValueError("deployment checks run in the aggregator")
        if self.exclusive and self.runs_on not in ("agent", "kubernetes"):
            raise ValueError("only agent and Kubernetes checks use a node's GPUs exclusively")
        if self.phase == "performance" and self.threshold is None and not self.minima:
            raise ValueError("a performance check needs a threshold or minima")
        return self


class CheckFile(_Strict):
    kind: Literal["CheckCatalog"]
    # Usable bandwidth of one PCIe lane, per direction, by generation (GB/s).
    pcie_lane_gbps: dict[int, float] = {}
    checks: tuple[CheckDef, ...] = ()


@dataclass(frozen=True)
class Checks:
    """Every check file merged: checks by id (in file order) and the PCIe lane table."""

    by_id: Mapping[str, CheckDef]
    pcie_lane_gbps: Mapping[int, float]

    def select(self, phases: tuple[str, ...] = (), ids: tuple[str, ...] = ()) -> list[CheckDef]:
        """Checks in catalog order, of the given phases and ids (empty means all)."""
        chosen = [
            c
            for c in self.by_id.values()
            if (not phases or c.phase in phases) and (not ids or c.id in ids)
        ]
        return sorted(chosen, key=lambda c: PHASES.index(c.phase))
