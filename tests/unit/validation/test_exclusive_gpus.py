"""GPU-exclusive checks never overlap on a node; everything else still runs beside them.

Fake agents and a fake Kubernetes runner log when each request or check starts and ends and
finish only when the test lets them: order is read from that log, never from a clock.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from plumb.aggregator.cli.render import validation_table
from plumb.aggregator.cli.validate import _waiting
from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.recipes.check_catalog import CheckDef, Checks
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.validation import Validator, run_json
from plumb.aggregator.validation.exclusive import GpuHolds, Hold
from plumb.aggregator.validation.kubernetes import Kube
from plumb.aggregator.validation.nccl_pair import RunNodes
from plumb.aggregator.validation.wire import AgentResult
from plumb.facts import Reading
from plumb.v1 import agent_pb2

CATALOG = load_catalog()
# Two agent checks of each kind, one shared Kubernetes check and both two-node checks.
CHECKS = (
    "ecc",
    "xid",
    "matmul-bf16",
    "nccl-allreduce",
    "nodes-ready",
    "nccl-allreduce-net",
    "nccl-allreduce-nvls",
)
EXCLUSIVE = {"matmul-bf16", "nccl-allreduce", "nccl-allreduce-net", "nccl-allreduce-nvls"}


def now() -> datetime:
    return datetime.now(UTC)


def hgx_h100() -> dict[str, Reading]:
    """An 8x H100 SXM node with a fabric manager: NVSwitch, Hopper (both pair checks fit)."""
    out = {"driver.fabric_manager_version": Reading.ok("580.65.06")}
    for i in range(8):
        out |= {
            f"gpus[{i}].index": Reading.ok(i),
            f"gpus[{i}].name": Reading.ok("NVIDIA H100 80GB HBM3"),
            f"gpus[{i}].pci_device_id": Reading.ok("0x2330"),
            f"gpus[{i}].nvlink_links_total": Reading.ok(18),
        }
    return out


class Log:
    """What runs now and what ran, in order: (start|end, name, nodes, exclusive)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, tuple[str, ...], bool]] = []
        self.active: set[str] = set()
        self.go = asyncio.Event()  # lets every started piece of work finish
        self._changed = asyncio.Event()

    async def work(self, name: str, nodes: tuple[str, ...], exclusive: bool) -> None:
        self.events.append(("start", name, nodes, exclusive))
        self.active.add(name)
        self._poke()
        await self.go.wait()
        self.active.discard(name)
        self.events.append(("end", name, nodes, exclusive))
        self._poke()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def until(self, cond: Callable[[], bool], timeout_s: float = 5) -> None:
        async with asyncio.timeout(timeout_s):
            while not cond():
                await self._changed.wait()

    def overlaps(self) -> list[tuple[str, str, bool]]:
        """Pairs of work that ran at once: (started later, already running, share a node
        and are both exclusive)."""
        running: dict[str, tuple[tuple[str, ...], bool]] = {}
        out = []
        for kind, name, nodes, exclusive in self.events:
            if kind == "end":
                del running[name]
                continue
            for other, (other_nodes, other_exclusive) in running.items():
                clash = bool(set(nodes) & set(other_nodes)) and exclusive and other_exclusive
                out.append((name, other, clash))
            running[name] = (nodes, exclusive)
        return out


class Cluster:
    """Three connected HGX H100 nodes, agents and a Kubernetes runner that log their work."""

    def __init__(self, names: tuple[str, ...] = ("a", "b", "c")) -> None:
        self.state = LiveState()
        for name in names:
            node = self.state.node(name, now())
            node.facts, node.connected, node.session_id = hgx_h100(), True, f"s-{name}"
        self.log = Log()
        self.finished: dict[str, asyncio.Event] = {}
        self.kube_saw: dict[str, tuple[str, ...]] = {}  # check -> the nodes it could choose
        self.validator: Validator | None = None
        self._tasks: set[asyncio.Task] = set()

    def send(self, node: str, msg: agent_pb2.ConnectResponse) -> str:
        req = msg.run_checks
        ids = [c.id for c in req.checks]
        exclusive = {bool(CATALOG.checks.by_id[i].exclusive) for i in ids}
        assert len(exclusive) == 1, f"one request mixes exclusive and shared checks: {ids}"
        task = asyncio.create_task(self._agent(node, req.request_id, ids, exclusive.pop()))
        self._tasks.add(task)
        return f"s-{node}"

    async def _agent(self, node: str, request_id: str, ids: list[str], exclusive: bool) -> None:
        await self.log.work(f"{node}:{'+'.join(ids)}", (node,), exclusive)
        for check_id in ids:
            result = AgentResult(request_id, check_id, "skip", "fake agent", None, "", 0.0, {})
            self.validator.check_result(node, result)

    async def kube(self, kube: Kube, check: CheckDef, nodes: RunNodes) -> tuple:
        self.kube_saw[check.id] = tuple(sorted(nodes.facts))
        held = tuple(sorted(nodes.facts)) if check.exclusive else ()
        await self.log.work(check.id, held, bool(check.exclusive))
        return "pass", "fake Kubernetes", {}

    def make(self, catalog=CATALOG, default_deadline_s: float = 60) -> Validator:
        async def save(run) -> None:
            pass

        def finished(run) -> None:
            self.finished.setdefault(run.id, asyncio.Event()).set()

        self.validator = Validator(
            catalog,
            self.state,
            _no_recipe,
            lambda n: 8,
            self.send,
            save,
            finished,
            now,
            max_parallel_nodes=10,
            grace_s=1.0,
            default_deadline_s=default_deadline_s,
            keep_runs=5,
            kube=Kube(api=None, namespace="plumb-validation"),  # type: ignore[arg-type]
            run_kube=self.kube,
        )
        return self.validator

    async def finish(self, run_id: str):
        async with asyncio.timeout(5):
            await self.finished.setdefault(run_id, asyncio.Event()).wait()
        return self.validator.get(run_id)


def _no_recipe(node):
    raise LookupError("no recipe in this test")


async def test_exclusive_checks_take_turns_on_a_node_while_shared_ones_run_beside_them():
    cluster = Cluster()
    v = cluster.make()
    run = v.start(checks=CHECKS)
    log = cluster.log
    # At once: the shared agent checks of every node, the shared Kubernetes check and the
    # first pair check (net, on the twins a and b, first by name).
    shared = {f"{n}:ecc+xid" for n in "abc"}
    await log.until(lambda: shared | {"nodes-ready", "nccl-allreduce-net"} <= log.active)
    assert "nccl-allreduce-nvls" not in log.active
    body = run_json(v.get(run.id), results=False)
    [waits] = body["progress"]["waiting_for_gpus"]
    assert waits["node"] == "(cluster)" and waits["checks"] == ["nccl-allreduce-nvls"]
    assert waits["gpus_of"] == ["a", "b"] and waits["held_by"] == ["nccl-allreduce-net on a, b"]
    # `plumb validate` says it on its progress bar and under its table.
    assert _waiting(body["progress"]["waiting_for_gpus"]) == (
        "nccl-allreduce-nvls waits for GPUs held by nccl-allreduce-net on a, b"
    )
    assert validation_table(body).notes[-1] == (
        "nccl-allreduce-nvls ((cluster)) waits for the GPUs of a, b, held by "
        "nccl-allreduce-net on a, b"
    )
    log.go.set()
    run = await cluster.finish(run.id)
    assert run.waiting == {} and run.counts()["pending"] == 0

    started = [name for kind, name, _, _ in log.events if kind == "start"]
    # Each node's benchmarks went as one request of their own, after its shared checks.
    for n in "abc":
        assert started.index(f"{n}:matmul-bf16+nccl-allreduce") > started.index(f"{n}:ecc+xid")
    overlaps = log.overlaps()
    assert [o for o in overlaps if o[2]] == []  # no two exclusive pieces of work on one node
    ran_beside = {frozenset(o[:2]) for o in overlaps}
    # Shared checks ran while the pair held the GPUs of a and b.
    assert frozenset({"a:ecc+xid", "nccl-allreduce-net"}) in ran_beside
    assert frozenset({"nodes-ready", "nccl-allreduce-net"}) in ran_beside
    # The pair checks saw only the two nodes they held.
    assert cluster.kube_saw["nccl-allreduce-net"] == ("a", "b")
    assert cluster.kube_saw["nccl-allreduce-nvls"] == ("a", "b")
    assert cluster.kube_saw["nodes-ready"] == ("a", "b", "c")


async def test_a_check_still_waiting_for_gpus_at_the_deadline_errors_saying_what_held_them():
    cluster = Cluster()
    v = cluster.make()
    # Nothing ever finishes: net holds a and b until the deadline.
    checks = ("matmul-bf16", "nccl-allreduce-net", "nccl-allreduce-nvls")
    run = await cluster.finish(v.start(checks=checks, deadline_s=0.2).id)
    waited = r"not started: the run's deadline of 0\.2 s passed while it waited [\d.]+ s"
    held = r"\(held by nccl-allreduce-net on a, b\)"
    for target, check, gpus in (
        ("(cluster)", "nccl-allreduce-nvls", "a, b"),
        ("a", "matmul-bf16", "a"),
        ("b", "matmul-bf16", "b"),
    ):
        result = run.results[(target, check)]
        pattern = rf"{waited} for the GPUs of {gpus} {held}"
        assert result.status == "error" and re.fullmatch(pattern, result.message), result
    # The benchmark of c was never held up by the pair: it ran, and the deadline cut it.
    assert "c:matmul-bf16" in cluster.log.active
    assert run.results[("c", "matmul-bf16")].message == "the run's deadline of 0.2 s passed"
    assert run.results[("(cluster)", "nccl-allreduce-net")].message == (
        "the run's deadline of 0.2 s passed"
    )
    assert run.waiting == {}


async def test_a_second_run_waits_for_the_first_runs_benchmarks_on_the_node():
    cluster = Cluster(("a",))
    v = cluster.make()
    first = v.start(checks=("matmul-bf16",))
    await cluster.log.until(lambda: "a:matmul-bf16" in cluster.log.active)
    # nodes-ready starts first (cluster checks are started before node checks), so once it
    # runs, the second run's benchmark has asked for a's GPUs.
    second = v.start(checks=("matmul-bf16", "nodes-ready"))
    await cluster.log.until(lambda: "nodes-ready" in cluster.log.active)
    [wait] = v.get(second.id).waiting.values()
    assert wait.target == "a" and wait.held_by == (f"matmul-bf16 on a (run {first.id[:8]})",)
    cluster.log.go.set()
    await cluster.finish(first.id)
    await cluster.finish(second.id)
    assert [o for o in cluster.log.overlaps() if o[2]] == []


def test_the_default_deadline_covers_the_serial_plan():
    cluster = Cluster()
    # Hand-summed from recipes/checks: ecc and xid (10 s each) + grace, then the benchmarks
    # (matmul-bf16 120 s, nccl-allreduce 300 s) + grace, then both pair checks in turn (1200 s
    # each + grace); nodes-ready (15 s) runs beside.
    expected = (20 + 1) + (420 + 1) + 2 * (1200 + 1)

    async def start() -> tuple[float, float, float]:
        v = cluster.make(default_deadline_s=60)
        planned = v.start(checks=CHECKS).deadline_s
        asked = v.start(checks=CHECKS, deadline_s=90).deadline_s
        short = v.start(checks=("ecc",)).deadline_s
        await v.close()
        return planned, asked, short

    assert asyncio.run(start()) == (expected, 90, 60)


def test_only_agent_and_pair_checks_may_be_exclusive():
    prom = CATALOG.checks.by_id["ai-service-metrics"].model_dump()
    with pytest.raises(ValidationError, match="GPUs exclusively"):
        CheckDef.model_validate({**prom, "exclusive": "gpus"})
    ready = CATALOG.checks.by_id["nodes-ready"].model_copy(update={"exclusive": "gpus"})
    checks = Checks({**CATALOG.checks.by_id, "nodes-ready": ready}, CATALOG.checks.pcie_lane_gbps)
    catalog = replace(CATALOG, checks=checks)
    with pytest.raises(InvalidInput, match="nodes-ready"):
        Cluster().make(catalog=catalog)


async def test_a_hold_waits_for_every_node_at_once_and_is_released_on_cancel():
    holds, told, looked = GpuHolds(), [], asyncio.Event()
    one = Hold("r1", ("matmul-bf16",), ("a",))
    pair = Hold("r1", ("nccl-allreduce-net",), ("a", "b"))

    def waiting(blockers: tuple[Hold, ...]) -> None:
        told.append(blockers)
        looked.set()

    async def enter() -> None:
        async with holds.hold(pair, waiting):
            pass

    async with holds.hold(one, waiting):
        waiter = asyncio.create_task(enter())
        async with asyncio.timeout(5):
            await looked.wait()
        # b is free, yet the pair takes nothing until a is free too.
        assert told == [(one,)] and holds.holders(("b",)) == ()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert holds.holders(("a", "b")) == ()
    async with holds.hold(pair, waiting):
        assert holds.holders(("b",)) == (pair,)
