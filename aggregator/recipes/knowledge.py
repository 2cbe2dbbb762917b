"""Knowledge rules: what the compatibility tables say about a node's facts, as findings.

Each rule reads one table under ``recipes/knowledge/`` and cites the row it used, so a
finding's ``source`` is the table's source, never a claim made in code. A rule that lacks
the facts it needs stays silent; missing facts are reported by the constraints instead.
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
    if driver is not None:
        found += _cuda_runtime(catalog, view, driver)
        found += _gpu_minimum(catalog, view, driver)
        found += _branch_lifecycle(catalog, driver, as_of)
        found += _fabric_manager(catalog, view, driver)
    return tuple(sorted(set(found), key=Finding.sort_key))


def _cuda_runtime(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """The driver is too old for a CUDA runtime found on the node."""
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
                "critical",
                f"CUDA runtime {text} needs driver >= {row.min_driver_mvc} even under minor-version"
                f" compatibility; node has {driver.text}",
                f"upgrade the driver to >= {row.min_driver_full}, or use the cuda-compat "
                "forward-compatibility package (data-center GPUs only)",
                row.source,
            )
        elif driver < need_full:
            yield Finding(
                "cuda-runtime-driver",
                "warning",
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
                "critical",
                f"{row.model} needs driver >= {row.min_driver}; node has {driver.text}",
                f"upgrade the driver to >= {row.min_driver}",
                row.source,
            )


def _branch_lifecycle(catalog: Catalog, driver: Version, as_of: dt.date) -> Iterator[Finding]:
    """The driver branch is past end of life, or a short-lived new-feature branch."""
    row = catalog.branches.get(driver.branch)
    if row is None:
        return
    if row.eol == "past" or (row.eol is not None and as_of.strftime("%Y-%m") > row.eol):
        when = "" if row.eol == "past" else f" ({row.eol})"
        yield Finding(
            "driver-branch-eol",
            "warning",
            f"driver branch R{row.branch} of {driver.text} is past end of life{when}",
            "move to a supported production or long-term branch",
            row.source,
        )
    elif row.type == "new_feature":
        yield Finding(
            "driver-branch-eol",
            "info",
            f"driver branch R{row.branch} is a new-feature branch with no long-term support",
            "prefer a production or long-term branch for clusters",
            row.source,
        )


def _fabric_manager(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """Fabric manager is missing, or its version differs from the driver, on NVSwitch GPUs."""
    models = view.get("gpu.model")
    for row in catalog.gpus:
        if not (row.fabric_manager and row.model in models):
            continue
        fm = view.one("fabric_manager.version")
        fix = f"install and start nvidia-fabricmanager {driver.text}, the driver's exact version"
        if fm is None:
            status = view.status("fabric_manager.version")
            yield Finding(
                "fabric-manager",
                "critical",
                f"{row.model} uses NVSwitch but fabric manager is not running ({status}):"
                " CUDA init fails with error 802",
                fix,
                row.source,
            )
        elif fm.strip() != driver.text:
            yield Finding(
                "fabric-manager",
                "critical",
                f"fabric manager {fm} differs from driver {driver.text}: it refuses to start",
                fix,
                row.source,
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
