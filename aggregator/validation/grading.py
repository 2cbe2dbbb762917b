"""Benchmarks graded against the GPU's peak: the threshold is a fraction of a catalog figure.

The node measures; this module decides. Peaks come from the GPU catalog row of the node's
first GPU (a node's GPUs are one model), or from its PCIe link for host<->device copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from plumb.aggregator.recipes import Catalog
from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.state.views import gpu_views
from plumb.aggregator.validation.model import CheckResult
from plumb.facts import Reading

__all__ = ["Peak", "grade", "peak_of"]


@dataclass(frozen=True)
class Peak:
    """The peak a threshold is a fraction of, in the measured unit, or why there is none."""

    value: float | None
    source: str


def peak_of(check: CheckDef, facts: Mapping[str, Reading], catalog: Catalog) -> Peak:
    """The peak of `check`'s threshold on the node with `facts`."""
    t = check.threshold
    if t is None:
        return Peak(None, "no threshold")
    if t.peak == "pcie_link":
        links = []
        for g in gpu_views(facts):
            gen, width = g.number("pcie_link_gen_max"), g.number("pcie_link_width_max")
            lane = catalog.checks.pcie_lane_gbps.get(int(gen)) if gen is not None else None
            if lane and width:
                links.append(lane * int(width))
        if not links:
            return Peak(None, "PCIe link generation and width not reported")
        return Peak(min(links) * t.scale, "PCIe link (gen x width)")
    first = next(iter(gpu_views(facts)), None)
    name = first.text("name") if first else None
    pci = first.text("pci_device_id") if first else None
    row = catalog.identify_gpu(name, pci)
    if row is None:
        return Peak(None, f"GPU {name or '?'} is not in the GPU catalog")
    figure = getattr(row, t.peak)
    if figure is None:
        return Peak(None, f"the GPU catalog has no {t.peak} for {row.model}")
    return Peak(figure * t.scale, f"{row.model} {t.peak}")


def grade(result: CheckResult, check: CheckDef, peak: Peak) -> CheckResult:
    """A benchmark's pass or fail from its figure, threshold and the GPU's peak."""
    t = check.threshold
    if t is None or result.status != "pass" or result.value is None:
        return result
    if peak.value is None:
        return replace(result, message=f"{result.message} (not graded: {peak.source})")
    threshold = t.fraction * peak.value
    ratio = result.value / peak.value
    graded = replace(result, threshold=round(threshold, 3), peak=peak.value, ratio_to_peak=ratio)
    shown = f"{result.value:.1f} {t.unit}, {ratio:.0%} of peak {peak.value:g}"
    if result.value >= threshold:
        return replace(graded, message=f"{shown}, threshold {threshold:.1f}; {result.message}")
    status = "fail" if check.severity == "critical" else "warn"
    msg = f"{shown}: below the threshold {threshold:.1f} ({t.fraction:.0%} of peak)"
    return replace(graded, status=status, message=f"{msg}; {result.message}")
