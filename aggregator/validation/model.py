"""A validation run and its results: plain frozen data the API, the store and reports share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Status = Literal["pass", "fail", "warn", "skip", "error"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "skip", "error")
State = Literal["running", "finished"]
Result = Literal["passed", "failed"]
# The node name of a cluster-wide result (a check that runs against the Kubernetes API or
# Prometheus once per run rather than on each node), and the `runs_on` of such checks.
CLUSTER = "(cluster)"
CLUSTER_WIDE = ("kubernetes", "prometheus")


@dataclass(frozen=True)
class Stack:
    """The node a figure came from, as twins are told apart: stack digest, GPU model (the
    GPU catalog's, else the NVML name), GPU count and fabric (recipes/drift.yaml `twins`)."""

    hash: str
    model: str
    gpus: int
    fabric: str

    @property
    def group(self) -> tuple[str, int, str]:
        """(model, GPU count, fabric): the nodes whose figures compare."""
        return self.model, self.gpus, self.fabric


@dataclass(frozen=True)
class CheckResult:
    """One check on one node: its status, why, and for a benchmark its graded figure."""

    node: str
    check_id: str
    phase: str
    severity: str
    status: Status
    message: str
    value: float | None = None
    unit: str = ""
    threshold: float | None = None
    peak: float | None = None
    ratio_to_peak: float | None = None
    duration_s: float = 0.0
    details: Mapping[str, str] = field(default_factory=dict)
    remediation: str = ""
    finished_at: datetime | None = None
    # What the node ran when it measured (validation/stack.py); None for a cluster check or a
    # multi-node run, whose figure no single node's stack explains.
    stack: Stack | None = None


@dataclass(frozen=True)
class PlannedCheck:
    """A check as the run will ask for it."""

    id: str
    phase: str
    severity: str
    runs_on: str


@dataclass(frozen=True)
class GpuWait:
    """Checks of a run waiting for GPUs that other GPU-exclusive checks hold (progress only,
    never stored): where their results land, the nodes they need and what holds those now."""

    target: str  # a node, or CLUSTER for a two-node check
    checks: tuple[str, ...]
    nodes: tuple[str, ...]
    held_by: tuple[str, ...]  # "nccl-allreduce-net on a, b", another run's with its id
    since: datetime


@dataclass
class ValidationRun:
    """One validation: what was asked, and the results so far (missing ones are pending)."""

    id: str
    phases: tuple[str, ...]
    checks: tuple[PlannedCheck, ...]
    nodes: tuple[str, ...]
    created_at: datetime
    deadline_s: float
    finished_at: datetime | None = None
    results: dict[tuple[str, str], CheckResult] = field(default_factory=dict)
    # Checks that wait for GPUs now, by (target, first check id); empty once finished.
    waiting: dict[tuple[str, str], GpuWait] = field(default_factory=dict)

    @property
    def state(self) -> State:
        return "running" if self.finished_at is None else "finished"

    def targets(self, check: PlannedCheck) -> tuple[str, ...]:
        """Where a check's results land: each node, or once for the cluster."""
        return (CLUSTER,) if check.runs_on in CLUSTER_WIDE else self.nodes

    @property
    def suites(self) -> tuple[str, ...]:
        """The nodes, then the cluster when a cluster-wide check is planned."""
        cluster = any(c.runs_on in CLUSTER_WIDE for c in self.checks)
        return (*self.nodes, CLUSTER) if cluster else self.nodes

    @property
    def total(self) -> int:
        return sum(len(self.targets(c)) for c in self.checks)

    def counts(self) -> dict[str, int]:
        """Results by status, plus `pending` for those not in yet."""
        got = Counter(r.status for r in self.results.values())
        out = {s: got.get(s, 0) for s in STATUSES}
        out["pending"] = self.total - len(self.results)
        return out

    @property
    def result(self) -> Result | None:
        """passed / failed once finished: any fail or error fails the run."""
        if self.finished_at is None:
            return None
        counts = self.counts()
        return "failed" if counts["fail"] or counts["error"] or counts["pending"] else "passed"

    def cut_short(self, why: str, at: datetime) -> None:
        """Finish the run now: every result not yet in becomes an `error` saying `why`."""
        for check in self.checks:
            for node in self.targets(check):
                self.results.setdefault(
                    (node, check.id),
                    CheckResult(
                        node, check.id, check.phase, check.severity, "error", why, finished_at=at
                    ),
                )
        self.finished_at = at

    def ordered(self) -> list[CheckResult]:
        """Results by node, then in catalog order."""
        order = {c.id: i for i, c in enumerate(self.checks)}
        return sorted(self.results.values(), key=lambda r: (r.node, order.get(r.check_id, 0)))


def health(results: Iterable[CheckResult]) -> tuple[str | None, list[CheckResult]]:
    """A node's GPU health from its latest check results: `fail` when a critical check
    failed or errored, `warn` when another did or one warned, `pass` when any passed and
    none of those; None when nothing ran but skips. With the results that decided it."""
    results = list(results)
    bad = [r for r in results if r.status in ("fail", "error")]
    if any(r.severity == "critical" for r in bad):
        return "fail", [r for r in bad if r.severity == "critical"]
    warned = bad + [r for r in results if r.status == "warn"]
    if warned:
        return "warn", warned
    if any(r.status == "pass" for r in results):
        return "pass", []
    return None, []
