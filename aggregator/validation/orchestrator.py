"""Validation runs: plan the checks, fan node checks out over the agents' streams, collect.

Deployment checks are decided here at once from each node's live facts and resolved recipe.
Agent checks go to every selected node as RunChecks messages on its open stream, under a
semaphore bounding the nodes in flight; each request gets the sum of its checks' timeouts plus
a grace period, counted from when it is sent, and the whole run a global deadline. A node that
is not connected, whose stream closes mid-run, or that runs past its time gets `error` for the
checks still missing: a run always finishes. Kubernetes checks run once per run against the
API server, beside the node checks, and report under the node "(cluster)"; with no Kubernetes
client they are skipped. Prometheus checks do the same against validation.prometheus_url,
skipped without it. Results are graded (benchmarks against the GPU's peak), kept in memory for
the last runs, and stored when the run starts and when it finishes, so a restart lists it and
finishes one it cut short (Store.finish_interrupted_validations).

Checks marked `exclusive: gpus` (benchmarks, the two-node NCCL checks) never overlap on a node
(validation/exclusive.py): a node's exclusive agent checks go as a second request once its
other checks are in and no two-node check holds its GPUs, and each two-node check waits until
neither of its nodes is held; everything else still runs at once. A check's timeout starts when
it starts, not while it waits. Without a deadline in the request, the run's deadline is the
default or, when longer, the plan's serial bound (every timeout, exclusive work in turn); a
check still waiting for GPUs when the deadline passes gets `error` saying what held them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime

from plumb.aggregator.errors import InvalidInput, NotFound
from plumb.aggregator.recipes import Catalog, Resolution
from plumb.aggregator.recipes.check_catalog import PHASES, CheckDef
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.validation import wire
from plumb.aggregator.validation.deployment import DEPLOYMENT
from plumb.aggregator.validation.exclusive import GpuHolds, serial_bound_s
from plumb.aggregator.validation.grading import grade, peak_of
from plumb.aggregator.validation.kubernetes import KUBERNETES, Kube, Verdict, run_check
from plumb.aggregator.validation.model import (
    CLUSTER,
    CLUSTER_WIDE,
    CheckResult,
    PlannedCheck,
    Stack,
    ValidationRun,
)
from plumb.aggregator.validation.nccl_pair import NCCL_PAIR, Pair, RunNodes, choose_pair
from plumb.aggregator.validation.prometheus import PROMETHEUS, Prometheus, run_query_check
from plumb.aggregator.validation.stack import stack_of
from plumb.aggregator.validation.xids import grade_xids
from plumb.facts import Reading
from plumb.v1 import agent_pb2

__all__ = ["Validator"]

log = logging.getLogger(__name__)
PROMETHEUS_ENV = "PLUMB_VALIDATION__PROMETHEUS_URL"

# (node, message) -> the id of the session it was queued on, or None when it could not be.
Send = Callable[[str, agent_pb2.ConnectResponse], str | None]


@dataclass
class _NodeRequest:
    run: ValidationRun
    node: str
    session: str
    remaining: dict[str, CheckDef]
    facts: Mapping[str, Reading]
    stack: Stack | None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Validator:
    """Starts validation runs and routes the agents' results into them."""

    def __init__(
        self,
        catalog: Catalog,
        state: LiveState,
        resolve: Callable[[NodeState], Resolution],
        baseline_gpus: Callable[[str], int | None],
        send: Send,
        save: Callable[[ValidationRun], Awaitable[None]],
        finished: Callable[[ValidationRun], None],
        clock: Callable[[], datetime],
        *,
        max_parallel_nodes: int,
        grace_s: float,
        default_deadline_s: float,
        keep_runs: int,
        kube: Kube | None = None,
        prometheus: Prometheus | None = None,
        run_kube: Callable[[Kube, CheckDef, RunNodes], Awaitable[Verdict]] = run_check,
    ):
        for check in catalog.checks.by_id.values():
            if check.runs_on == "aggregator" and check.id not in DEPLOYMENT:
                raise InvalidInput(f"check {check.id!r} runs in the aggregator, which lacks it")
            if check.runs_on == "kubernetes" and check.id not in KUBERNETES | NCCL_PAIR:
                raise InvalidInput(f"Kubernetes check {check.id!r} is not implemented")
            if check.runs_on == "prometheus" and check.id not in PROMETHEUS:
                raise InvalidInput(f"Prometheus check {check.id!r} is not implemented")
            if check.exclusive and check.runs_on == "kubernetes" and check.id not in NCCL_PAIR:
                raise InvalidInput(
                    f"check {check.id!r} needs GPUs exclusively, but only the two-node NCCL "
                    "checks say which nodes a Kubernetes check runs on"
                )
        self._kube = kube
        self._run_kube = run_kube  # kubernetes.run_check; a test's fake records when each starts
        self._prometheus = prometheus
        self._catalog = catalog
        self._state = state
        self._resolve = resolve
        self._baseline_gpus = baseline_gpus
        self._send = send
        self._save = save
        self._finished = finished  # counts the finished run
        self._clock = clock
        self._parallel = asyncio.Semaphore(max_parallel_nodes)
        self._holds = GpuHolds()
        self._grace_s = grace_s
        self._default_deadline_s = default_deadline_s
        self._keep_runs = keep_runs
        self._runs: OrderedDict[str, ValidationRun] = OrderedDict()
        self._requests: dict[str, _NodeRequest] = {}
        self._tasks: set[asyncio.Task] = set()
        # The last result of each (node, check), for metrics.
        self.latest: dict[tuple[str, str], CheckResult] = {}

    # -- starting and reading runs -----------------------------------------------------------

    def start(
        self,
        *,
        phases: tuple[str, ...] = (),
        nodes: tuple[str, ...] = (),
        checks: tuple[str, ...] = (),
        deadline_s: float | None = None,
    ) -> ValidationRun:
        """Plan a run and start it in the background; InvalidInput / NotFound name the problem."""
        unknown_phases = sorted(set(phases) - set(PHASES))
        if unknown_phases:
            raise InvalidInput(f"unknown phase(s) {unknown_phases}; phases are {list(PHASES)}")
        unknown = sorted(set(checks) - set(self._catalog.checks.by_id))
        if unknown:
            raise InvalidInput(
                f"unknown check(s) {unknown}", hint="GET /v1/validations/checks lists them"
            )
        defs = self._catalog.checks.select(phases, checks)
        if not defs:
            raise InvalidInput("no check matches these phases and check ids")
        if nodes:
            missing = [n for n in nodes if self._state.get(n) is None]
            if missing:
                raise NotFound(f"no node named {', '.join(map(repr, missing[:5]))}")
            chosen = tuple(dict.fromkeys(nodes))
        else:
            chosen = tuple(sorted(n.name for n in self._state.nodes()))
        if not chosen:
            raise InvalidInput("no node to validate", hint="start agents, or name nodes")
        facts = {n: s.facts for n in chosen if (s := self._state.get(n)) and s.facts}
        nodes_of = RunNodes(self._catalog, facts)
        holds = self._cluster_holds(defs, nodes_of)
        run = ValidationRun(
            id=uuid.uuid4().hex,
            phases=tuple(p for p in PHASES if p in {d.phase for d in defs}),
            checks=tuple(PlannedCheck(d.id, d.phase, d.severity, d.runs_on) for d in defs),
            nodes=chosen,
            created_at=self._clock(),
            deadline_s=deadline_s
            or max(self._default_deadline_s, self._serial_bound_s(defs, holds)),
        )
        self._keep(run)
        task = asyncio.create_task(
            self._run(run, defs, nodes_of, holds), name=f"validation-{run.id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        log.info(
            "validation started",
            extra={
                "run": run.id,
                "nodes": len(chosen),
                "checks": len(defs),
                "deadline_s": run.deadline_s,
            },
        )
        return run

    def _serial_bound_s(self, defs: list[CheckDef], holds: Mapping[str, tuple]) -> float:
        """The plan's serial bound (exclusive.serial_bound_s) over the checks that will run:
        without a client, cluster checks skip at once."""
        asked = {"kubernetes": self._kube is not None, "prometheus": self._prometheus is not None}
        runs = [d for d in defs if d.runs_on not in asked or asked[d.runs_on]]
        return serial_bound_s(runs, set(holds), self._grace_s)

    def _cluster_holds(self, defs: list[CheckDef], nodes: RunNodes) -> dict[str, tuple[str, ...]]:
        """The nodes each GPU-exclusive Kubernetes check will hold: its pair, where it has one
        (where it has none, or there is no client, it skips and holds nothing)."""
        out = {}
        for d in defs:
            if d.exclusive and d.runs_on == "kubernetes" and self._kube is not None:
                pair = choose_pair(d, nodes)
                if isinstance(pair, Pair):
                    out[d.id] = pair.nodes
        return out

    async def attach(self, run: ValidationRun) -> None:
        """A run finished outside Plumb (an external benchmark): kept, counted and stored
        like any other; the store's error propagates, so the caller knows it was not kept."""
        self._keep(run)
        self.latest.update(run.results)
        self._finished(run)
        log.info("benchmark attached", extra={"run": run.id, "nodes": len(run.nodes)})
        await self._save(run)

    def _keep(self, run: ValidationRun) -> None:
        self._runs[run.id] = run
        while len(self._runs) > self._keep_runs:
            oldest = next(iter(self._runs))
            if self._runs[oldest].finished_at is None:
                break  # never forget a running run
            del self._runs[oldest]

    def get(self, run_id: str) -> ValidationRun | None:
        """A run held in memory (running or recent)."""
        return self._runs.get(run_id)

    def recent(self) -> list[ValidationRun]:
        return list(reversed(self._runs.values()))

    def latest_by_node(self) -> dict[str, list[CheckResult]]:
        """Each node's latest result of every check it ran."""
        out: dict[str, list[CheckResult]] = {}
        for (node, _), result in self.latest.items():
            out.setdefault(node, []).append(result)
        return out

    async def close(self) -> None:
        """Cancel running runs (shutdown)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- results from the streams ------------------------------------------------------------

    def check_result(self, node: str, result: wire.AgentResult) -> None:
        """An agent's CheckResult; late ones (after a timeout) and strays are dropped."""
        req = self._requests.get(result.request_id)
        if req is None or req.node != node:
            log.debug("stray check result", extra={"node": node, "request": result.request_id})
            return
        check = req.remaining.pop(result.check_id, None)
        if check is None:
            return
        out = CheckResult(
            node=node,
            check_id=check.id,
            phase=check.phase,
            severity=check.severity,
            status=result.status,  # type: ignore[arg-type]
            message=result.message,
            value=result.value,
            unit=result.unit,
            duration_s=result.duration_s,
            details=result.details,
            remediation=check.remediation,
            finished_at=self._clock(),
            stack=req.stack,
        )
        if check.threshold is not None:
            out = grade(out, check, peak_of(check, req.facts, self._catalog))
        if check.id == "xid":
            out = grade_xids(out, self._catalog.xids)
        self._record(req.run, _soften(out, check))
        if not req.remaining:
            req.done.set()

    def stream_closed(self, node: str, session: str) -> None:
        """The node's stream ended: its checks still out on that stream get `error`."""
        for req in [r for r in self._requests.values() if r.node == node]:
            if req.session == session:
                self._fail_remaining(req, "node disconnected mid-run")

    # -- the run -----------------------------------------------------------------------------

    async def _run(
        self,
        run: ValidationRun,
        defs: list[CheckDef],
        nodes: RunNodes,
        holds: Mapping[str, tuple[str, ...]],
    ) -> None:
        await self._store(run)
        try:
            async with asyncio.timeout(run.deadline_s):
                agent = [d for d in defs if d.runs_on == "agent"]
                cluster = [d for d in defs if d.runs_on in CLUSTER_WIDE]
                for node in run.nodes:
                    self._local_checks(run, node, defs)
                await asyncio.gather(
                    *(self._cluster(run, d, nodes, holds.get(d.id, ())) for d in cluster),
                    *(self._node(run, n, agent) for n in run.nodes if agent),
                )
        except TimeoutError:
            log.warning("validation deadline", extra={"run": run.id, "s": run.deadline_s})
        finally:
            now = self._clock()
            for wait in run.waiting.values():
                why = (
                    f"not started: the run's deadline of {run.deadline_s:g} s passed while it "
                    f"waited {(now - wait.since).total_seconds():.1f} s for the GPUs of "
                    f"{', '.join(wait.nodes)} (held by {'; '.join(wait.held_by)})"
                )
                for check_id in wait.checks:
                    d = self._catalog.checks.by_id[check_id]
                    self._record(run, self._result(wait.target, d, "error", why, now))
            run.waiting.clear()
            for req in [r for r in self._requests.values() if r.run is run]:
                self._fail_remaining(req, f"the run's deadline of {run.deadline_s:g} s passed")
            for d in defs:
                for node in (CLUSTER,) if d.runs_on in CLUSTER_WIDE else run.nodes:
                    if (node, d.id) not in run.results:
                        why = f"the run's deadline of {run.deadline_s:g} s passed"
                        self._record(run, self._result(node, d, "error", why, now))
            run.finished_at = now
            self.latest.update(run.results)
            log.info("validation finished", extra={"run": run.id, "result": run.result})
            self._finished(run)
        await self._store(run)

    async def _store(self, run: ValidationRun) -> None:
        try:
            await self._save(run)
        except Exception as exc:  # the run stays readable from memory; say it was not stored
            log.warning("validation not stored", extra={"run": run.id, "error": str(exc)})

    def _local_checks(self, run: ValidationRun, node: str, defs: list[CheckDef]) -> None:
        """Deployment checks, decided here from the node's live facts."""
        local = [d for d in defs if d.runs_on == "aggregator"]
        if not local:
            return
        state = self._state.get(node)
        now = self._clock()
        if state is None or not state.facts:
            for d in local:
                self._record(run, self._result(node, d, "error", "no facts from node", now))
            return
        stack = stack_of(state.facts, self._catalog)
        for d in local:
            try:
                status, msg, details = DEPLOYMENT[d.id](
                    state.facts, self._resolve(state), self._catalog
                )
            except Exception as exc:  # one node's broken recipe must not end the run
                log.warning("deployment check failed", extra={"node": node, "error": str(exc)})
                status, msg, details = "error", f"{type(exc).__name__}: {exc}", {}
            result = self._result(node, d, status, msg, now)
            self._record(run, _soften(replace(result, details=details, stack=stack), d))

    async def _cluster(
        self, run: ValidationRun, d: CheckDef, nodes: RunNodes, held: tuple[str, ...]
    ) -> None:
        """One Kubernetes or Prometheus check, once for the cluster; skipped without a client.
        A GPU-exclusive one first waits until no other holds its nodes (`held`), and sees
        only those nodes, so the pair it runs on is the one it holds."""
        if d.runs_on == "prometheus":
            if self._prometheus is None:
                why = "no Prometheus to ask: set validation.prometheus_url"
                self._record(run, self._result(CLUSTER, d, "skip", f"{why} ({PROMETHEUS_ENV})"))
                return
            prometheus = self._prometheus
            await self._timed(run, d, lambda: run_query_check(prometheus, d, run.nodes))
        elif self._kube is None:
            self._record(run, self._result(CLUSTER, d, "skip", "Kubernetes is not configured"))
        elif held:
            kube, only = self._kube, RunNodes(nodes.catalog, {n: nodes.facts[n] for n in held})
            async with self._gpus(run, CLUSTER, [d], held):
                await self._timed(run, d, lambda: self._run_kube(kube, d, only))
        else:
            kube = self._kube
            await self._timed(run, d, lambda: self._run_kube(kube, d, nodes))

    async def _timed(
        self, run: ValidationRun, d: CheckDef, call: Callable[[], Awaitable[Verdict]]
    ) -> None:
        """Start a cluster check now and record its verdict with how long it ran."""
        started = asyncio.get_running_loop().time()
        status, msg, details = await call()
        took = asyncio.get_running_loop().time() - started
        result = replace(self._result(CLUSTER, d, status, msg), details=details, duration_s=took)
        self._record(run, _soften(result, d))

    async def _node(self, run: ValidationRun, node: str, defs: list[CheckDef]) -> None:
        """A node's agent checks: the shared ones at once; then, once those are in and no
        other GPU-exclusive check holds the node, its exclusive ones in one request (so one
        after another on the agent)."""
        shared = [d for d in defs if not d.exclusive]
        exclusive = [d for d in defs if d.exclusive]
        if shared and (why := await self._request(run, node, shared)):
            for d in exclusive:
                self._record(run, self._result(node, d, "error", why))
            return
        if exclusive:
            async with self._gpus(run, node, exclusive, (node,)):
                await self._request(run, node, exclusive)

    def _gpus(
        self, run: ValidationRun, target: str, defs: list[CheckDef], nodes: tuple[str, ...]
    ) -> AbstractAsyncContextManager[None]:
        """Hold the GPUs of `nodes` for `defs`; while waiting, the run's progress says so."""
        return self._holds.hold_for(run, target, tuple(d.id for d in defs), nodes, self._clock)

    async def _request(self, run: ValidationRun, node: str, defs: list[CheckDef]) -> str | None:
        """One RunChecks request of `defs` to the node, awaited for their timeouts plus the
        grace period from now; why the node could not be asked, when it could not."""
        async with self._parallel:
            state = self._state.get(node)
            why = None
            if state is None or not state.connected:
                why = "node not connected"
            else:
                request_id = uuid.uuid4().hex
                specs = [wire.CheckRequest(d.id, d.timeout_s, self._params(d, node)) for d in defs]
                session = self._send(node, wire.run_checks(request_id, specs))
                if session is None:
                    why = "could not queue the request on the node's stream (busy or closed)"
            if why is not None:
                for d in defs:
                    self._record(run, self._result(node, d, "error", why))
                return why
            stack = stack_of(state.facts, self._catalog)
            req = _NodeRequest(run, node, session, {d.id: d for d in defs}, state.facts, stack)
            self._requests[request_id] = req
            budget_s = sum(d.timeout_s for d in defs) + self._grace_s
            try:
                async with asyncio.timeout(budget_s):
                    await req.done.wait()
            except TimeoutError:
                self._fail_remaining(req, f"no result within the node's {budget_s:g} s budget")
            finally:
                del self._requests[request_id]
            return None

    def _params(self, check: CheckDef, node: str) -> dict[str, str]:
        params = {k: str(v) for k, v in check.parameters.items()}
        if check.id == "gpu-count" and (gpus := self._baseline_gpus(node)) is not None:
            params["expected_gpus"] = str(gpus)
        params.setdefault("timeout_s", f"{check.timeout_s:g}")
        return params

    def _fail_remaining(self, req: _NodeRequest, why: str) -> None:
        now = self._clock()
        for d in list(req.remaining.values()):
            self._record(req.run, self._result(req.node, d, "error", why, now))
        req.remaining.clear()
        req.done.set()

    def _record(self, run: ValidationRun, result: CheckResult) -> None:
        run.results.setdefault((result.node, result.check_id), result)

    def _result(
        self, node: str, d: CheckDef, status: str, message: str, at: datetime | None = None
    ) -> CheckResult:
        return CheckResult(
            node=node,
            check_id=d.id,
            phase=d.phase,
            severity=d.severity,
            status=status,  # type: ignore[arg-type]
            message=message,
            remediation=d.remediation,
            finished_at=at or self._clock(),
        )


def _soften(result: CheckResult, check: CheckDef) -> CheckResult:
    """A failed check of warning or info severity is a warning, not a failure of the run."""
    if result.status == "fail" and check.severity != "critical":
        return replace(result, status="warn")
    return result
