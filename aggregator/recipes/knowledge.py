"""Knowledge rules: what the compatibility tables say about a node's facts, as findings.

Each rule reads one table under ``recipes/knowledge/`` and cites the row it used, so a
finding's ``source`` is the table's source, never a claim made in code. How bad each case is
and what its finding says (message, remediation, and the source of a rule that reads no row)
come from ``recipes/drift.yaml`` (``knowledge.cases``), filled from the node and the row. A
rule that lacks the facts it needs stays silent; missing facts are reported by the
constraints instead. Rules about hardware a node may or may not have (NVSwitch, fabric
manager) apply only where the node's own facts show it (``knowledge.fabric_evidence``), never
because of the GPU model alone; a fabric that finished training shows that fabric manager ran,
even where the host does not show it (``knowledge.fabric_trained``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Literal

from plumb.aggregator.recipes.catalog import Catalog
from plumb.aggregator.recipes.checks import evaluate
from plumb.aggregator.recipes.drift_rules import KnowledgeCase
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.recipes.schema import DriverBranchRow
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


def _finding(
    rule: str, case: KnowledgeCase, row_source: str | None = None, **fields: str
) -> Finding:
    """The finding of ``case`` with its templates filled; the row's source where it read one."""
    source = row_source if row_source is not None else case.source
    assert source is not None  # drift_rules checks that a rowless case names its source
    return Finding(
        rule,
        case.severity,
        case.message.format(**fields),
        case.remediation.format(**fields),
        source,
    )


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
    cases = catalog.drift.knowledge.cases
    for text in view.get("cuda.runtime_version"):
        runtime = parse_version(text)
        row = catalog.cuda_driver.get(runtime.major_minor) if runtime else None
        if row is None:
            continue
        need_mvc, need_full = parse_version(row.min_driver_mvc), parse_version(row.min_driver_full)
        assert need_mvc is not None and need_full is not None
        if driver < need_full:
            below_mvc = driver < need_mvc
            yield _finding(
                "cuda-runtime-driver",
                cases.cuda_runtime_below_mvc if below_mvc else cases.cuda_runtime_below_full,
                row.source,
                runtime=text,
                driver=driver.text,
                min_driver_mvc=row.min_driver_mvc,
                min_driver_full=row.min_driver_full,
            )


def _gpu_minimum(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """The driver is below the GPU's minimum."""
    for row in catalog.gpus:
        if row.model in view.get("gpu.model") and driver < parse_version(row.min_driver):  # type: ignore[operator]
            yield _finding(
                "gpu-minimum-driver",
                catalog.drift.knowledge.cases.gpu_below_minimum,
                row.source,
                model=row.model,
                min_driver=row.min_driver,
                driver=driver.text,
            )


def _branch_lifecycle(catalog: Catalog, driver: Version, as_of: dt.date) -> Iterator[Finding]:
    """The driver branch is past end of life, or a short-lived new-feature branch.

    A branch the table does not list is past end of life when it is older than a listed
    long-term branch that is: no branch is supported longer than a long-term one, and branches
    are numbered in release order.
    """
    row = catalog.branches.get(driver.branch)
    cases = catalog.drift.knowledge.cases
    if row is None:
        ended = [
            r
            for r in catalog.branches.values()
            if r.type == "long_term" and int(r.branch) > int(driver.branch) and _ended(r, as_of)
        ]
        if ended:
            nearest = min(ended, key=lambda r: int(r.branch))
            yield _finding(
                "driver-branch-eol",
                cases.branch_unlisted_past_eol,
                branch=driver.branch,
                driver=driver.text,
                long_term=nearest.branch,
                when=_when(nearest),
            )
    elif _ended(row, as_of):
        yield _finding(
            "driver-branch-eol",
            cases.branch_past_eol,
            row.source,
            branch=row.branch,
            driver=driver.text,
            when=_when(row),
        )
    elif row.type == "new_feature":
        yield _finding(
            "driver-branch-eol",
            cases.branch_new_feature,
            row.source,
            branch=row.branch,
            driver=driver.text,
        )


def _ended(row: DriverBranchRow, as_of: dt.date) -> bool:
    return row.eol == "past" or (row.eol is not None and as_of.strftime("%Y-%m") > row.eol)


def _when(row: DriverBranchRow) -> str:
    """`` (YYYY-MM)`` where the table dates the end of life, else empty."""
    return "" if row.eol == "past" or row.eol is None else f" ({row.eol})"


def _fabric_manager(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """Fabric manager is missing where the node's own facts show an NVSwitch fabric that has
    not finished training, or its version differs from the driver."""
    rules = catalog.drift.knowledge
    evidence = evaluate(rules.fabric_evidence, view)
    if evidence.status != "pass":
        return
    fm = view.one("fabric_manager.version")
    if fm is None and evaluate(rules.fabric_trained, view).status != "pass":
        yield _finding(
            "fabric-manager",
            rules.cases.fabric_manager_missing,
            evidence=evidence.detail,
            status=view.status("fabric_manager.version"),
            driver=driver.text,
        )
    elif fm is not None and fm.strip() != driver.text:
        yield _finding(
            "fabric-manager",
            rules.cases.fabric_manager_mismatch,
            fabric_manager=fm,
            driver=driver.text,
        )


def _kernel_module(catalog: Catalog, view: NodeView, driver: Version) -> Iterator[Finding]:
    """The loaded kernel module is another version than the user-space driver library."""
    module = view.one("driver.kernel_module_version")
    if module is None or parse_version(module) == driver:
        return
    yield _finding(
        "driver-kernel-module",
        catalog.drift.knowledge.cases.kernel_module_mismatch,
        module=module,
        driver=driver.text,
    )


def _unknown_gpus(catalog: Catalog, view: NodeView) -> Iterator[Finding]:
    """A GPU the catalog does not know: named, so it never resolves silently."""
    for gpu in view.get("gpu.unknown"):
        yield _finding("unknown-gpu", catalog.drift.knowledge.cases.unknown_gpu, gpu=gpu)


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
