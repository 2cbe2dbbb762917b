"""Validated stacks and rollout gates: hand-written pools, canaries and check results, and
Gates over a live state, deciding again only the pools that changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from plumb.aggregator.drift import DriftEngine, DriftFinding
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.gates import (
    CANARY_FACT,
    Gate,
    Gates,
    Member,
    ValidatedStacks,
    decide,
    validated_stack,
)
from plumb.aggregator.recipes import ResolutionCache, load_catalog
from plumb.aggregator.settings import GateSettings, RecipeSettings
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.state.stack import stack_hash
from plumb.aggregator.validation.model import CheckResult, ValidationRun
from plumb.facts import Reading

POOL = "eks/h100/ubuntu/training/any"
LABEL = "plumb.dev/canary=true"
OLD, NEW = "a" * 64, "b" * 64
T0 = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)
CATALOG = load_catalog()


def member(name: str, stack: str | None, *, canary: bool = False, **kw) -> Member:
    return Member(name, canary, kw.pop("connected", True), stack, **kw)


def pool(*canaries: Member, rest: tuple[str | None, ...] = (OLD, OLD, OLD)) -> list[Member]:
    return [*canaries, *(member(f"gpu-{i}", s) for i, s in enumerate(rest))]


def test_a_pool_without_canaries_is_closed_and_says_which_label_makes_one():
    gate = decide(POOL, pool(), LABEL)
    assert not gate.open
    assert gate.reasons == (
        "no canary nodes: label some of the pool's Nodes plumb.dev/canary=true",
    )


def test_canaries_validated_on_a_new_stack_open_the_gate():
    canaries = [member(f"canary-{i}", NEW, canary=True, validated=NEW) for i in (1, 2)]
    gate = decide(POOL, pool(*canaries), LABEL)
    assert (gate.open, gate.state, gate.reasons) == (True, "open", ())
    assert (gate.stack, gate.pool_stack, gate.nodes) == (NEW, OLD, 5)
    assert [c.name for c in gate.canaries] == ["canary-1", "canary-2"]


def test_a_canary_not_yet_validated_at_its_new_stack_keeps_it_closed():
    canaries = [
        member("canary-1", NEW, canary=True, validated=NEW),
        member("canary-2", NEW, canary=True, validated=None, previous=OLD),
    ]
    gate = decide(POOL, pool(*canaries), LABEL)
    assert gate.reasons == ("canary-2: not validated at its stack bbbbbbbbbbbbbbbb",)


def test_canaries_on_the_pools_own_stack_have_nothing_to_gate():
    gate = decide(POOL, pool(member("canary-1", OLD, canary=True, validated=OLD)), LABEL)
    assert gate.reasons == (
        "canary-1: runs the stack aaaaaaaaaaaaaaaa the rest of the pool runs (or no other node "
        "to compare with), and was validated at no other before",
    )


def test_the_gate_stays_open_once_the_rest_of_the_pool_has_caught_up():
    canary = member("canary-1", NEW, canary=True, validated=NEW, previous=OLD)
    gate = decide(POOL, pool(canary, rest=(NEW, NEW, OLD)), LABEL)
    assert gate.open and gate.pool_stack == NEW


def test_a_canary_tied_with_the_rest_on_two_stacks_is_not_new_without_a_previous_one():
    canary = member("canary-1", NEW, canary=True, validated=NEW)
    gate = decide(POOL, pool(canary, rest=(OLD, NEW)), LABEL)
    assert gate.pool_stack is None
    assert not gate.open and "the rest of the pool runs" in gate.reasons[0]


def test_a_canary_with_a_straggler_or_health_finding_does_not_match_its_twins():
    straggler = DriftFinding(
        "f1", "canary-1", "straggler", "all-reduce-busbw", "380", "300", "warning", "", "r", T0
    )  # type: ignore[arg-type]  # a kind the baselines work adds
    canary = member("canary-1", NEW, canary=True, validated=NEW, blocking=(straggler,))
    gate = decide(POOL, pool(canary), LABEL)
    assert gate.reasons == ("canary-1: open warning straggler finding all-reduce-busbw",)


def test_canaries_on_different_stacks_or_down_keep_the_gate_closed():
    third = "c" * 64
    canaries = [
        member("canary-1", NEW, canary=True, validated=NEW),
        member("canary-2", third, canary=True, validated=third, connected=False),
        member("canary-3", None, canary=True),
    ]
    gate = decide(POOL, pool(*canaries), LABEL)
    assert gate.stack is None
    assert gate.reasons == (
        "the canaries run different stacks: -, bbbbbbbbbbbbbbbb, cccccccccccccccc",
        "canary-2: its agent is not reporting",
        "canary-3: no stack facts yet",
    )


# -- validated at the current stack --------------------------------------------------------


def result(status: str, finished: datetime, duration_s: float = 0.0, check: str = "ecc"):
    return CheckResult(
        "gpu-1", check, "conformance", "critical", status, "", duration_s=duration_s,
        finished_at=finished,
    )  # type: ignore[arg-type]  # fmt: skip


def node(since: datetime = T0):
    state = LiveState()
    n = state.node("gpu-1", T0)
    n.stack_hash, n.stack_since = NEW, since
    return state, n


def test_a_node_is_validated_at_its_stack_only_by_checks_begun_after_it_changed():
    _, n = node()
    later = T0 + timedelta(minutes=5)
    assert validated_stack(n, [result("pass", later), result("skip", later, check="xid")]) == NEW
    # A 10-minute benchmark that finished 5 minutes after the change began before it.
    assert validated_stack(n, [result("pass", later, duration_s=600)]) is None
    assert validated_stack(n, [result("pass", T0 - timedelta(seconds=1))]) is None
    assert validated_stack(n, [result("pass", later), result("fail", later, check="pcie")]) is None
    assert validated_stack(n, [result("skip", later)]) is None
    assert validated_stack(n, []) is None


def test_validated_stacks_remember_the_stack_validated_before():
    state, n = node()
    latest: dict[str, list[CheckResult]] = {}
    stacks = ValidatedStacks(state, lambda: latest)
    run = ValidationRun("r", ("conformance",), (), ("gpu-1",), T0, 60)
    n.stack_hash = OLD
    latest["gpu-1"] = [result("pass", T0 + timedelta(minutes=1))]
    stacks.record(run)
    assert stacks.previous("gpu-1") is None
    n.stack_hash, n.stack_since = NEW, T0 + timedelta(minutes=2)
    stacks.record(run)  # the old results do not validate the new stack
    assert stacks.previous("gpu-1") is None
    latest["gpu-1"] = [result("pass", T0 + timedelta(minutes=3))]
    stacks.record(run)
    stacks.record(run)  # validated again at the same stack: the one before stays
    assert stacks.previous("gpu-1") == OLD


def test_the_stack_hash_follows_versions_and_inventory_not_counters():
    paths = ("driver.driver_version", "gpus[].vbios_version")
    facts = {
        "driver.driver_version": Reading.ok("580.95.05"),
        "gpus[0].vbios_version": Reading.ok("96.00.99.00.01"),
        "gpus[0].ecc_uncorrected_volatile": Reading.ok(0),
    }
    base = stack_hash(facts, paths)
    counted = {**facts, "gpus[0].ecc_uncorrected_volatile": Reading.ok(2)}
    assert stack_hash(counted, paths) == base
    upgraded = {**facts, "driver.driver_version": Reading.ok("590.44.01")}
    assert stack_hash(upgraded, paths) != base
    # Hex SHA-256: its first 16 digits are a valid label value.
    assert len(base) == 64 and all(c in "0123456789abcdef" for c in base)


def _pools() -> tuple[LiveState, Evaluator, ValidatedStacks, Gates]:
    """Three ubuntu nodes (one a canary, down to no stack facts) and two rhel ones, evaluated."""
    state = LiveState()
    evaluator = Evaluator(
        state,
        ResolutionCache(CATALOG),
        RecipeSettings(),
        DriftEngine(CATALOG.drift, lambda: T0, xids=CATALOG.xids),
    )
    for name, os_id in (("u-1", "ubuntu"), ("u-2", "ubuntu"), ("canary", "ubuntu"),
                        ("r-1", "rhel"), ("r-2", "rhel")):  # fmt: skip
        node = state.node(name, T0)
        node.connected = True
        node.facts = {"host.os_id": Reading.ok(os_id)}
        if name == "canary":
            node.facts = {**node.facts, CANARY_FACT: Reading.ok(True)}
        evaluator.node_changed(node)
    stacks = ValidatedStacks(state, dict)
    return state, evaluator, stacks, Gates(state, evaluator, stacks, dict, GateSettings())


def _gates(gates: Gates) -> dict[str, Gate]:
    return {g.pool.split("/")[2]: g for g in gates.all()}


def test_all_decides_again_only_the_pools_of_the_nodes_touched_since():
    state, evaluator, _, gates = _pools()
    first = _gates(gates)
    assert {os: g.nodes for os, g in first.items()} == {"ubuntu": 3, "rhel": 2}
    assert first["ubuntu"].reasons == ("canary: no stack facts yet",)
    state.get("canary").connected = False  # type: ignore[union-attr]
    assert _gates(gates) == first, "nothing was touched: the gates stand as decided"
    gates.touched("canary")
    then = _gates(gates)
    assert then["ubuntu"].reasons == (
        "canary: its agent is not reporting",
        "canary: no stack facts yet",
    )
    assert then["rhel"] is first["rhel"], "a pool none of whose nodes changed is not decided"


def test_a_node_that_moves_or_goes_leaves_its_pools_gate():
    state, evaluator, _, gates = _pools()
    _gates(gates)
    moved = state.get("r-1")
    moved.facts = {"host.os_id": Reading.ok("ubuntu")}  # type: ignore[union-attr]
    evaluator.node_changed(moved)  # type: ignore[arg-type]
    gates.touched("r-1")
    assert {os: g.nodes for os, g in _gates(gates).items()} == {"ubuntu": 4, "rhel": 1}
    state.remove("r-2")
    evaluator.forget("r-2")
    gates.touched("r-2")
    assert set(_gates(gates)) == {"ubuntu"}, "a pool without nodes has no gate"


def test_a_pools_stack_counts_follow_its_nodes_from_scrape_to_scrape():
    state, evaluator, _, gates = _pools()
    for name, stack in (("u-1", OLD), ("u-2", OLD), ("canary", NEW)):
        state.get(name).stack_hash = stack  # type: ignore[union-attr]
        gates.touched(name)
    ubuntu = _gates(gates)["ubuntu"]
    assert (ubuntu.pool_stack, ubuntu.stack, ubuntu.nodes) == (OLD, NEW, 3)

    def move(name: str, stack: str) -> Gate:
        state.get(name).stack_hash = stack  # type: ignore[union-attr]
        gates.touched(name)
        return _gates(gates)["ubuntu"]

    assert move("u-1", NEW).pool_stack is None, "one node on each stack: a tie"
    assert move("u-2", NEW).pool_stack == NEW
    assert move("u-2", OLD).pool_stack is None, "a node counted once, on its last stack"
    state.remove("u-2")
    evaluator.forget("u-2")
    gates.touched("u-2")
    ubuntu = _gates(gates)["ubuntu"]
    assert (ubuntu.pool_stack, ubuntu.nodes) == (NEW, 2)
    unlabelled = state.get("canary")
    unlabelled.facts = {"host.os_id": Reading.ok("ubuntu")}  # type: ignore[union-attr]
    evaluator.node_changed(unlabelled)  # type: ignore[arg-type]
    gates.touched("canary")
    ubuntu = _gates(gates)["ubuntu"]
    assert (ubuntu.pool_stack, ubuntu.canaries, ubuntu.nodes) == (NEW, (), 2)
    assert ubuntu.reasons[0].startswith("no canary nodes")


def test_a_recorded_validation_run_decides_every_pool_again():
    _, _, stacks, gates = _pools()
    first = _gates(gates)
    stacks.record(ValidationRun("r", ("conformance",), (), ("canary",), T0, 60))
    then = _gates(gates)
    assert then == first
    assert all(then[os] is not first[os] for os in first)
