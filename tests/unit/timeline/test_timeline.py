"""The change timeline: per-node history rows grouped into fleet events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.store import HistoryEntry
from plumb.aggregator.timeline import fact_like, group_changes
from plumb.aggregator.validation import ValidationRun
from plumb.facts import Reading

T0 = datetime(2026, 11, 30, 3, 10, tzinfo=UTC)
POOL = "eks/h100/ubuntu/training/any"
GAP = timedelta(minutes=30)
NCCL = "nccl.libraries[0].version"


def _nccl(node: str, minute: float, old: str = "2.27.7", new: str = "2.28.3"):
    at = T0 + timedelta(minutes=minute)
    return node, HistoryEntry(NCCL, Reading.ok(old), Reading.ok(new), at)


def _finding(node: str, at: datetime, *, closed_at: datetime | None = None) -> DriftFinding:
    return DriftFinding(
        id=f"{node}-nccl",
        node=node,
        kind="recipe",
        component="nccl",
        expected="2.27.7",
        observed="2.28.3",
        severity="warning",
        remediation="roll the node back to NCCL 2.27.7, or move the recipe",
        recipe_hash="c" * 64,
        opened_at=at,
        closed_at=closed_at,
    )


def test_a_rollout_over_part_of_a_pool_is_one_event_with_its_findings_and_validation():
    nodes = [f"h100-{i}" for i in range(16)]
    pools = dict.fromkeys(nodes, POOL)
    # 12 of 16 nodes take NCCL 2.28.3 between 03:10 and 03:14, a minute or less apart.
    rows = [_nccl(n, i / 3) for i, n in enumerate(nodes[:12])]
    opened = _finding("h100-0", T0)
    elsewhere = _finding("h100-15", T0)  # not a node of the rollout
    run = ValidationRun(
        id="run-1",
        phases=("performance",),
        checks=(),
        nodes=("h100-3",),
        created_at=T0 + timedelta(minutes=20),
        deadline_s=600,
    )

    (event,) = group_changes(rows, pools, {POOL: 16}, [opened, elsewhere], [run], gap=GAP)

    assert (event.fact, event.old, event.new, event.pool) == ("nccl.libraries[*].version",
        "2.27.7", "2.28.3", POOL)  # fmt: skip
    assert event.nodes == tuple(sorted(nodes[:12]))
    assert (event.started_at, event.ended_at) == (T0, T0 + timedelta(minutes=11 / 3))
    assert event.summary == (
        "nccl.libraries[*].version 2.27.7 → 2.28.3 on 12 of 16 nodes of "
        "eks/h100/ubuntu/training/any, 2026-11-30 03:10–03:13"
    )
    assert event.opened == (opened,) and event.closed == ()
    assert [r.id for r in event.validations] == ["run-1"]


def test_eight_gpus_of_a_node_changing_count_the_node_once():
    at = T0
    rows = [
        ("b200-0", HistoryEntry(f"gpus[{i}].vbios_version", Reading.ok("97.00.5A.00.01"),
            Reading.ok("97.00.88.00.0F"), at + timedelta(seconds=i)))
        for i in range(8)
    ]  # fmt: skip
    (event,) = group_changes(rows, {"b200-0": "p"}, {"p": 1}, [], [], gap=GAP)
    assert event.fact == "gpus[*].vbios_version" and event.nodes == ("b200-0",)
    assert event.summary.endswith("on 1 of 1 node of p, 2026-11-30 03:10")


def test_a_quiet_gap_longer_than_the_gap_splits_two_waves_newest_first():
    rows = [_nccl("a", 0), _nccl("b", 10), _nccl("c", 100), _nccl("d", 110)]
    pools = dict.fromkeys("abcd", POOL)
    events = group_changes(rows, pools, {POOL: 4}, [], [], gap=GAP)
    assert [e.nodes for e in events] == [("c", "d"), ("a", "b")]


def test_other_transitions_pools_and_removed_nodes_are_events_of_their_own():
    rows = [
        _nccl("a", 0),
        _nccl("b", 1, old="2.26.2"),  # came from another version: another transition
        _nccl("x", 2),  # another pool
        _nccl("gone", 3),  # removed since: no pool now
        ("a", HistoryEntry("driver.driver_version", Reading.ok("580.95.05"),
            Reading.not_supported(), T0)),
    ]  # fmt: skip
    pools = {"a": POOL, "b": POOL, "x": "gke/a100/cos/training/any"}
    events = group_changes(rows, pools, {POOL: 2, "gke/a100/cos/training/any": 1}, [], [], gap=GAP)
    got = {(e.fact, e.old, e.new, e.pool, e.nodes) for e in events}
    assert got == {
        ("nccl.libraries[*].version", "2.27.7", "2.28.3", POOL, ("a",)),
        ("nccl.libraries[*].version", "2.26.2", "2.28.3", POOL, ("b",)),
        ("nccl.libraries[*].version", "2.27.7", "2.28.3", "gke/a100/cos/training/any", ("x",)),
        ("nccl.libraries[*].version", "2.27.7", "2.28.3", None, ("gone",)),
        ("driver.driver_version", "580.95.05", "not_supported", POOL, ("a",)),
    }
    (unknown,) = [e for e in events if e.pool is None]
    assert "on 1 node," in unknown.summary


def test_a_finding_closed_by_the_change_is_named_and_one_closed_long_before_is_not():
    rows = [_nccl("a", 0)]
    fixed = _finding("a", T0 - timedelta(days=3), closed_at=T0 + timedelta(seconds=1))
    old = _finding("a", T0 - timedelta(days=9), closed_at=T0 - timedelta(days=8))
    (event,) = group_changes(rows, {"a": POOL}, {POOL: 1}, [fixed, old], [], gap=GAP)
    assert event.closed == (fixed,) and event.opened == ()


def test_fact_filters_match_the_path_and_below_with_sql_wildcards_escaped():
    assert fact_like("nccl") == "nccl%"
    assert fact_like("gpus[*].vbios_version") == "gpus[%].vbios\\_version%"
    assert fact_like("100%") == "100\\%%"
