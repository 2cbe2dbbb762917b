"""Several replicas writing one database: findings opened once, ownership, the tail's reads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from plumb.aggregator.drift import Baseline, DriftFinding
from plumb.aggregator.store import Change, NodeUpdate, Store
from plumb.facts import Reading

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)


@pytest.fixture
def replicas(url: str) -> Iterator[tuple[Store, Store]]:
    a, b = Store(url, replica="a"), Store(url, replica="b")
    yield a, b
    a.close()
    b.close()


def _finding(id: str, observed: str = "550", **kw) -> DriftFinding:
    fields = dict(
        id=id, node="n1", kind="recipe", component="driver", expected="580", observed=observed,
        severity="critical", remediation="upgrade", recipe_hash="a" * 64, opened_at=T0,
    )  # fmt: skip
    return DriftFinding(**(fields | kw))


def _open(store: Store) -> list[DriftFinding]:
    return [f for f in store.findings(node="n1") if f.closed_at is None]


def test_two_replicas_opening_the_same_finding_store_one_open_row(replicas):
    a, b = replicas
    a.apply([NodeUpdate("n1", T0, opened=(_finding("from-a"),))])
    b.apply([NodeUpdate("n1", T0, opened=(_finding("from-b", opened_at=T0 + timedelta(1)),))])
    assert [f.id for f in a.findings(node="n1")] == ["from-a"]


def test_findings_opened_since_are_the_open_ones_of_any_replica(replicas):
    a, b = replicas
    later = T0 + timedelta(1)
    a.apply([NodeUpdate("n1", T0, opened=(_finding("old"),))])
    b.apply([NodeUpdate("n1", T0, opened=(_finding("new", component="cuda", opened_at=later),))])
    gone = _finding("gone", component="nccl", opened_at=later, closed_at=later)
    b.apply([NodeUpdate("n1", T0, opened=(gone,))])
    assert [f.id for f in a.findings_opened_since(later)] == ["new"]


def test_a_close_ends_the_open_row_whichever_replica_inserted_it(replicas):
    a, b = replicas
    a.apply([NodeUpdate("n1", T0, opened=(_finding("from-a"),))])
    b.apply([NodeUpdate("n1", T0, opened=(_finding("from-b"),))])
    b.apply([NodeUpdate("n1", T0, closed=(_finding("from-b", closed_at=T0 + timedelta(1)),))])
    (row,) = a.findings(node="n1")
    assert row.id == "from-a" and row.closed_at == T0 + timedelta(1)


def test_a_late_close_of_older_content_leaves_the_reopened_finding_open(replicas):
    a, b = replicas
    old, new = _finding("a-1"), _finding("a-2", observed="560")
    later = T0 + timedelta(1)
    a.apply([NodeUpdate("n1", T0, opened=(old,))])
    a.apply([NodeUpdate("n1", later, closed=(replace(old, closed_at=later),), opened=(new,))])
    # b saw the old facts late and now closes what it held, then catches up.
    b.apply([NodeUpdate("n1", later, closed=(replace(_finding("b-1"), closed_at=later),))])
    b.apply([NodeUpdate("n1", later, opened=(_finding("b-2", observed="560"),))])
    assert [f.id for f in _open(a)] == ["a-2"]


def test_a_close_and_reopen_of_one_key_in_one_batch_keep_their_order(replicas):
    a, _ = replicas
    first, second = _finding("f1"), _finding("f2", observed="560")
    a.apply(
        [
            NodeUpdate("n1", T0, opened=(first,)),
            NodeUpdate("n1", T0, closed=(replace(first, closed_at=T0),), opened=(second,)),
        ]
    )
    assert [f.id for f in _open(a)] == ["f2"]
    assert len(a.findings(node="n1")) == 2


def test_a_disconnect_leaves_a_node_another_replica_took_over(replicas):
    a, b = replicas
    a.apply([NodeUpdate("n1", T0, connected=True, last_report_at=T0)])
    b.apply([NodeUpdate("n1", T0, connected=True, last_report_at=T0)])
    a.apply([NodeUpdate("n1", T0, connected=False)])  # a's old stream ends after the move
    (row,) = a.changed_nodes(None)
    assert row.connected and row.owner == "b"
    b.apply([NodeUpdate("n1", T0, connected=False)])
    (row,) = a.changed_nodes(None)
    assert not row.connected and row.owner == "b"  # the last holder stays named


def test_changed_nodes_name_the_writer_and_when_facts_and_baseline_moved(replicas):
    a, b = replicas
    fact = Change("driver.driver_version", None, Reading.ok("580"))
    first = {fact.path: fact.new}
    a.apply([NodeUpdate("n1", T0, (fact,), facts=first, connected=True, last_report_at=T0)])
    (row,) = b.changed_nodes(None)
    assert row.changed_by == "a" and row.facts_changed_at == row.changed_at
    assert row.baseline_changed_at is None
    facts_at = row.facts_changed_at
    a.apply([NodeUpdate("n1", T0, last_report_at=T0 + timedelta(30))])  # a heartbeat
    (row,) = b.changed_nodes(row.changed_at)
    assert row.facts_changed_at == facts_at and row.changed_at > facts_at
    assert row.last_report_at == T0 + timedelta(30)
    a.apply([NodeUpdate("n1", T0, opened=(_finding("f"),))])  # drift alone: not a row change
    assert b.changed_nodes(row.changed_at + timedelta(microseconds=1)) == []
    b.apply([NodeUpdate("n1", T0, baseline=Baseline({}, 8, T0))])
    upgrade = Change(fact.path, fact.new, Reading.ok("590"))
    a.apply([NodeUpdate("n1", T0, (upgrade,), facts={fact.path: upgrade.new})])
    (row,) = a.changed_nodes(row.changed_at + timedelta(microseconds=1))
    # a wrote the row last, facts included, yet b's baseline stays visible to a third replica.
    assert row.changed_by == "a" and row.baseline_changed_by == "b"
    assert row.facts_changed_at > row.baseline_changed_at > facts_at
    facts, baselines = a.contents(["n1"], ["n1"])
    assert facts == {"n1": {"driver.driver_version": Reading.ok("590")}}
    assert baselines == {"n1": Baseline({}, 8, T0)}
    assert a.contents([], []) == ({}, {})


def test_each_replica_sees_when_the_others_were_last_alive(replicas):
    a, b = replicas
    a.see_replica(T0)
    assert b.see_replica(T0 + timedelta(seconds=1)) == {"a": T0, "b": T0 + timedelta(seconds=1)}
    assert a.see_replica(T0 + timedelta(days=2)) == {"a": T0 + timedelta(days=2)}


@pytest.mark.parametrize("keep_history", [True, False])
def test_a_removal_is_a_changed_row_the_other_replicas_read(replicas, keep_history):
    a, b = replicas
    fact = Change("driver.driver_version", None, Reading.ok("580"))
    first = {fact.path: fact.new}
    a.apply([NodeUpdate("n1", T0, (fact,), facts=first, connected=True, last_report_at=T0)])
    (before,) = b.changed_nodes(None)
    b.apply([NodeUpdate("n1", T0, removed=True, keep_history=keep_history)])

    (row,) = a.changed_nodes(before.changed_at + timedelta(microseconds=1))
    assert row.removed and row.changed_by == "b" and not row.connected
    assert a.changed_nodes(None) == []  # a start loads no removed node
    assert a.load() == []
    assert (a.history("n1") != []) is keep_history


def test_a_removed_name_reporting_again_is_first_seen_anew(replicas):
    a, _ = replicas
    fact = Change("driver.driver_version", None, Reading.ok("580"))
    first = {fact.path: fact.new}
    a.apply([NodeUpdate("n1", T0, (fact,), facts=first)])
    a.apply([NodeUpdate("n1", T0 + timedelta(1), removed=True)])
    a.apply([NodeUpdate("n1", T0 + timedelta(2), (fact,), facts=first)])
    (row,) = a.load()
    assert row.first_seen_at == T0 + timedelta(2)
