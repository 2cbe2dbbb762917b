"""External benchmark runs as validation results: a nccl-tests log run by Slurm or an MPI
operator counts as evidence for the nodes it ran on.

Each run in the log becomes one finished validation run with a result per node, under the
check id `nccl-<collective>` (`nccl-allreduce` is the built-in check, so its threshold and
severity apply). A whole run passes, then is graded like the built-in check against its GPU
model's catalog peak; a failed run (wrong values, a failure line) fails; an incomplete one
is an `error`, never a pass. A multi-node run is not graded against NVLink: the network
bounds it, and the catalog has no peak for the network; nor does it carry a node's stack, so
it never counts among a node's twins' figures.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from plumb.aggregator.errors import InvalidInput, NotFound
from plumb.aggregator.recipes import Catalog
from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.validation.grading import grade, peak_of
from plumb.aggregator.validation.model import CheckResult, PlannedCheck, ValidationRun
from plumb.aggregator.validation.stack import stack_of
from plumb.facts import Reading
from plumb.nccltests import NcclNode, NcclRun, summary

__all__ = ["EXTERNAL", "external_runs", "recorded"]

# `runs_on` of a check that ran outside Plumb and was attached afterwards.
EXTERNAL = "external"
_STATUS = {"ok": "pass", "failed": "fail", "incomplete": "error"}
_UNGRADED_MULTI = "a multi-node run is bound by the network, which the GPU catalog has no peak for"


def recorded(runs: Iterable[ValidationRun]) -> list[ValidationRun]:
    """The attached benchmark runs among `runs`, in their order."""
    return [r for r in runs if r.checks and all(c.runs_on == EXTERNAL for c in r.checks)]


def external_runs(
    runs: Sequence[NcclRun],
    state: LiveState,
    catalog: Catalog,
    now: datetime,
    nodes: tuple[str, ...] = (),
) -> list[ValidationRun]:
    """One finished validation run per nccl-tests run, with a graded result per node.

    `nodes` names the Plumb nodes the log ran on; without it each host the log names must
    be a known node (by node name or host name). InvalidInput / NotFound say what is missing.
    """
    if not runs:
        raise InvalidInput(
            "no nccl-tests run in the log",
            hint="send the stdout of an *_perf binary (or its -J JSON report)",
        )
    out = []
    for i, run in enumerate(runs, 1):
        targets = _targets(run, state, nodes, i)
        check_id = f"nccl-{run.collective.replace('_', '')}" if run.collective else "nccl-tests"
        check = catalog.checks.by_id.get(check_id)
        severity = check.severity if check is not None else "critical"
        planned = PlannedCheck(check_id, "performance", severity, EXTERNAL)
        multi = len(targets) > 1 or len(run.nodes) > 1
        results = {}
        for node in targets:
            result = _result(run, node, check_id, severity, check, now)
            if not multi:
                result = replace(result, stack=stack_of(node.facts, catalog))
            if check is not None and check.threshold is not None and result.status == "pass":
                if multi:
                    result = replace(
                        result, message=f"{result.message} (not graded: {_UNGRADED_MULTI})"
                    )
                else:
                    facts = _model_facts(run, node, catalog)
                    result = grade(result, check, peak_of(check, facts, catalog))
            if result.status == "fail" and severity != "critical":
                result = replace(result, status="warn")
            results[(node.name, check_id)] = result
        out.append(
            ValidationRun(
                id=uuid.uuid4().hex,
                phases=("performance",),
                checks=(planned,),
                nodes=tuple(n.name for n in targets),
                created_at=now,
                deadline_s=0.0,
                finished_at=now,
                results=results,
            )
        )
    return out


def _targets(run: NcclRun, state: LiveState, named: tuple[str, ...], index: int) -> list[NodeState]:
    if named:
        missing = [n for n in named if state.get(n) is None]
        if missing:
            raise NotFound(
                f"no node named {', '.join(map(repr, missing[:5]))}",
                hint="`plumb nodes` lists the known nodes",
            )
        return [state.get(n) for n in dict.fromkeys(named)]  # type: ignore[misc]
    if not run.nodes:
        raise InvalidInput(
            f"run {index} of the log names no hosts (no `# Using devices` lines)",
            hint="name the nodes it ran on in `nodes`",
        )
    by_host = _hosts(state)
    unknown = [h.host for h in run.nodes if h.host not in by_host]
    if unknown:
        raise InvalidInput(
            f"run {index} ran on hosts Plumb does not know: {', '.join(unknown[:5])}",
            hint="name the nodes it ran on in `nodes` (pods' host names are not node names)",
        )
    return list({by_host[h.host].name: by_host[h.host] for h in run.nodes}.values())


def _hosts(state: LiveState) -> dict[str, NodeState]:
    """Each node under its node name and its reported host name (short and full)."""
    out: dict[str, NodeState] = {}
    for node in state.nodes():
        reading = node.facts.get("host.hostname")
        names = [node.name]
        if reading is not None and reading.status == "ok" and reading.value:
            names.append(str(reading.value))
        for name in names:
            out.setdefault(name, node)
            out.setdefault(name.split(".", 1)[0], node)
    return out


def _result(
    run: NcclRun,
    node: NodeState,
    check_id: str,
    severity: str,
    check: CheckDef | None,
    now: datetime,
) -> CheckResult:
    figure, largest = run.busbw_gbps, run.largest
    what = f"nccl-tests {run.collective or '?'} on {run.ranks or '?'} ranks"
    if figure is not None and largest is not None:
        what += f": busbw {figure:g} GB/s at {largest.size_bytes} B"
    message = "; ".join([what, *run.reasons])
    details = {
        k: str(v)
        for k, v in summary(run).items()
        if v is not None and k not in ("nodes", "reasons")
    }
    details["source"] = "nccl-tests (external)"
    details["hosts"] = ",".join(n.host for n in run.nodes)
    return CheckResult(
        node=node.name,
        check_id=check_id,
        phase="performance",
        severity=severity,
        status=_STATUS[run.status],  # type: ignore[arg-type]
        message=message,
        value=figure,
        unit="GB/s" if figure is not None else "",
        details=details,
        remediation=check.remediation if check is not None else "",
        finished_at=now,
    )


def _model_facts(run: NcclRun, node: NodeState, catalog: Catalog) -> Mapping[str, Reading]:
    """The facts the peak is read from: the GPU model the log names for this node, else the
    node's own facts. Older drivers named GPUs without the `NVIDIA ` prefix."""
    host = _host_of(run, node)
    if host is None or host.model is None:
        return node.facts
    named = next(
        (n for n in (host.model, f"NVIDIA {host.model}") if catalog.identify_gpu(n, None)),
        host.model,
    )
    return {"gpus[0].index": Reading.ok(0), "gpus[0].name": Reading.ok(named)}


def _host_of(run: NcclRun, node: NodeState) -> NcclNode | None:
    hostname = node.facts.get("host.hostname")
    names = {node.name, node.name.split(".", 1)[0]}
    if hostname is not None and hostname.status == "ok" and hostname.value:
        names |= {str(hostname.value), str(hostname.value).split(".", 1)[0]}
    matches = [h for h in run.nodes if h.host in names]
    if matches:
        return matches[0]
    return run.nodes[0] if len(run.nodes) == 1 else None
