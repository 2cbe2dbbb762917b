"""Knowledge rules: what the compatibility tables say about a node's facts, as findings.

Each rule reads one table under ``recipes/knowledge/`` and cites the row it used, so a
finding's ``source`` is the table's source, never a claim made in code. How bad each case is
comes from ``recipes/drift.yaml`` (``knowledge.severities``). A rule that lacks the facts it
needs stays silent; missing facts are reported by the constraints instead. Rules about
hardware a node may or may not have (NVSwitch, fabric manager) apply only where the node's
own facts show it (``knowledge.fabric_evidence``), never because of the GPU model alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Literal

from plumb.aggregator.recipes.catalog import Catalog
from plumb.aggregator.recipes.checks import evaluate
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.recipes.versions import Version, parse_version

__all__ = ["Finding", "findings"]

Severity = Literal["critical", "warning", "info"]
_RANK = {"critical": 0, "warning": 1, "info": 2}
_CATALOG_SOURCE = "recipes/knowledge/gpus.yaml (the GPU catalog)"


@dataclass(frozen=True)
class Finding:
    """One thing wrong (or worth knowing) about the node, with what to do about it."""

    rule: str
    severity: Severity
    message: str
    remediation: str
    source: str

    def sort_key(self) -> tuple[int, str, str]:
        return (_RANK[self.severity], self.rule, self.message)

    def to_dict(self) -> dict[str, str]:
        """The finding as a plain dict."""
        return asdict(self)


def findings(catalog: Catalog, view: NodeView, as_of: dt.date) -> tuple[Finding, ...]:
    """Every finding the knowledge rules produce for ``view``, most severe first."""
    driver = parse_version(view.one("driver.version") or "")
    found: list[Finding] = list(_known_bad(catalog, view))
    found += _unknown_gpus(catalog, view)
    if driver is not None:
        found += _cuda_runtime(catalog, view, driver)
        found += _gpu_minimum(catalog, view, driver)
        found += _branch_lifecycle(catalog, driver, as_of)
        found += _fabric_manager(catalog, view, driver)
        found += _kernel_module(catalog, view, driver)
    return tuple(sorted(set(found), key=Finding.sort_key))


def _cuda_runtime(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """The driver is too old for a CUDA runtime found on the node."""
    severity = catalog.drift.knowledge.severities
    for text in view.get("cuda.runtime_version"):
        runtime = parse_version(text)
        row = catalog.cuda_driver.get(runtime.major_minor) if runtime else None
        if row is None:
            continue
        need_mvc, need_full = parse_version(row.min_driver_mvc), parse_version(row.min_driver_full)
        assert need_mvc is not None and need_full is not None
        if driver < need_mvc and driver < need_full:
            yield Finding(
                "cuda-runtime-driver",
                severity.cuda_runtime_below_mvc,
                f"CUDA runtime {text} needs driver >= {row.min_driver_mvc} even under minor-version"
                f" compatibility; node has {driver.text}",
                f"upgrade the driver to >= {row.min_driver_full}, or use the cuda-compat "
                "forward-compatibility package (data-center GPUs only)",
                row.source,
            )
        elif driver < need_full:
            yield Finding(
                "cuda-runtime-driver",
                severity.cuda_runtime_below_full,
                f"CUDA runtime {text} needs driver >= {row.min_driver_full} for its full feature"
                f" set; node has {driver.text} (minor-version compatibility only: PTX JIT of"
                " newer code fails)",
                f"upgrade the driver to >= {row.min_driver_full}, or ship SASS for the GPU",
                row.source,
            )


def _gpu_minimum(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """The driver is below the GPU's minimum."""
    for row in catalog.gpus:
        if row.model in view.get("gpu.model") and driver < parse_version(row.min_driver):  # type: ignore[operator]
            yield Finding(
                "gpu-minimum-driver",
                catalog.drift.knowledge.severities.gpu_below_minimum,
                f"{row.model} needs driver >= {row.min_driver}; node has {driver.text}",
                f"upgrade the driver to >= {row.min_driver}",
                row.source,
            )


def _branch_lifecycle(catalog: Catalog, driver: Version, as_of: dt.date) -> Iterator[Finding]:
    """The driver branch is past end of life, or a short-lived new-feature branch."""
    row = catalog.branches.get(driver.branch)
    severity = catalog.drift.knowledge.severities
    if row is None:
        return
    if row.eol == "past" or (row.eol is not None and as_of.strftime("%Y-%m") > row.eol):
        when = "" if row.eol == "past" else f" ({row.eol})"
        yield Finding(
            "driver-branch-eol",
            severity.branch_past_eol,
            f"driver branch R{row.branch} of {driver.text} is past end of life{when}: no more"
            " security fixes or kernel-compatibility updates",
            "move to a supported production or long-term branch",
            row.source,
        )
    elif row.type == "new_feature":
        yield Finding(
            "driver-branch-eol",
            severity.branch_new_feature,
            f"driver branch R{row.branch} is a new-feature branch with no long-term support",
            "prefer a production or long-term branch for clusters",
            row.source,
        )


def _fabric_manager(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """Fabric manager is missing, or its version differs from the driver, on a node whose own
    facts show an NVSwitch fabric."""
    rules = catalog.drift.knowledge
    evidence = evaluate(rules.fabric_evidence, view)
    if evidence.status != "pass":
        return
    fm = view.one("fabric_manager.version")
    fix = f"install and start nvidia-fabricmanager {driver.text}, the driver's exact version"
    source = "https://docs.nvidia.com/datacenter/tesla/pdf/fabric-manager-user-guide.pdf"
    if fm is None:
        yield Finding(
            "fabric-manager",
            rules.severities.fabric_manager_missing,
            f"the node shows an NVSwitch fabric {evidence.detail} but fabric manager is not"
            f" installed ({view.status('fabric_manager.version')}): CUDA init fails with"
            " error 802",
            fix,
            source,
        )
    elif fm.strip() != driver.text:
        yield Finding(
            "fabric-manager",
            rules.severities.fabric_manager_mismatch,
            f"fabric manager {fm} differs from driver {driver.text}: it refuses to start",
            fix,
            "https://github.com/NVIDIA/gpu-operator/issues/544",
        )


def _kernel_module(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """The loaded kernel module is another version than the user-space driver library."""
    module = view.one("driver.kernel_module_version")
    if module is None or parse_version(module) == driver:
        return
    yield Finding(
        "driver-kernel-module",
        catalog.drift.knowledge.severities.kernel_module_mismatch,
        f"kernel module {module} differs from the user-space driver library {driver.text}"
        " (driver/library version mismatch): NVML and CUDA fail until the module is reloaded",
        "reboot the node (or unload and reload the nvidia modules) so the kernel module matches"
        " the installed driver; drain it first",
        "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/index.html",
    )


def _unknown_gpus(catalog: Catalog, view: NodeView) -> Iterator[Finding]:
    """A GPU the catalog does not know: named, so it never resolves silently."""
    for gpu in view.get("gpu.unknown"):
        yield Finding(
            "unknown-gpu",
            catalog.drift.knowledge.severities.unknown_gpu,
            f"GPU {gpu} is not in the GPU catalog: the recipe cannot pick its accelerator"
            " overlay, minimum driver or peak figures",
            "add a row for it to recipes/knowledge/gpus.yaml (PCI device id, NVML name, "
            "architecture, peaks, source), and an accelerator overlay",
            _CATALOG_SOURCE,
        )


def _known_bad(catalog: Catalog, view: NodeView) -> Iterator[Finding]:
    """A known-bad combination is present."""
    for row in catalog.known_bad:
        outcome = evaluate(row.when, view)
        if outcome.status == "pass":
            yield Finding(
                f"known-bad:{row.name}",
                row.severity,
                f"{row.effect} [{outcome.detail}]",
                row.remediation,
                row.source,
            )
