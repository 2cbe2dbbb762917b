"""Retention: what is older than the cut-off leaves the database; live state never does."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.settings import StoreSettings
from plumb.aggregator.store import Change, NodeUpdate, Store
from plumb.aggregator.store.retention import Retention
from plumb.aggregator.validation import ValidationRun
from plumb.facts import Reading

OLD = datetime(2026, 1, 10, tzinfo=UTC)
CUTOFF = datetime(2026, 6, 1, tzinfo=UTC)
RECENT = datetime(2026, 11, 20, tzinfo=UTC)


def _driver(node: str, at: datetime, old: str | None, new: str) -> NodeUpdate:
    before = None if old is None else Reading.ok(old)
    change = Change("driver.driver_version", before, Reading.ok(new))
    return NodeUpdate(node=node, at=at, changes=(change,), facts={change.path: change.new})


def _finding(component: str, opened_at: datetime) -> DriftFinding:
    return DriftFinding(
        id=f"n1-{component}",
        node="n1",
        kind="recipe",
        component=component,
        expected="580.173.02",
        observed="570.86.15",
        severity="warning",
        remediation="roll the node",
        recipe_hash="b" * 64,
        opened_at=opened_at,
    )


def _run(run_id: str, finished_at: datetime | None) -> ValidationRun:
    return ValidationRun(
        id=run_id,
        phases=("readiness",),
        checks=(),
        nodes=("n1",),
        created_at=OLD,
        deadline_s=60,
        finished_at=finished_at,
    )


def test_history_older_than_the_cutoff_goes_and_current_facts_stay(store: Store):
    store.apply([_driver("n1", OLD, None, "570.86.15")])
    store.apply([_driver("n1", OLD + timedelta(days=1), "570.86.15", "575.57.08")])
    store.apply([_driver("n1", RECENT, "575.57.08", "580.173.02")])

    assert store.prune(CUTOFF)["fact_changes"] == 2

    (kept,) = store.history("n1")
    assert (kept.old, kept.new, kept.at) == (
        Reading.ok("575.57.08"),
        Reading.ok("580.173.02"),
        RECENT,
    )
    (node,) = store.load()
    assert node.facts == {"driver.driver_version": Reading.ok("580.173.02")}


def test_closed_findings_age_out_and_open_ones_stay_however_old(store: Store):
    stale = _finding("driver", OLD)
    fixed = _finding("cuda", OLD)
    store.apply([NodeUpdate(node="n1", at=OLD, opened=(stale, fixed))])
    closed = replace(fixed, closed_at=OLD + timedelta(days=2))
    store.apply([NodeUpdate(node="n1", at=OLD, closed=(closed,))])

    assert store.prune(CUTOFF)["drift_findings"] == 1

    assert store.load_drift()[0] == [stale]
    assert [f.id for f in store.findings()] == ["n1-driver"]


def test_finished_runs_age_out_and_a_running_one_stays(store: Store):
    store.save_validation(_run("old", OLD + timedelta(minutes=5)))
    store.save_validation(_run("running", None))
    store.save_validation(_run("recent", RECENT))

    assert store.prune(CUTOFF)["validation_runs"] == 1

    assert store.validation("old") is None
    assert sorted(r.id for r in store.validations()) == ["recent", "running"]


def test_a_node_removed_before_the_cutoff_goes_with_everything_it_kept(store: Store):
    store.apply([_driver("gone", OLD, None, "570.86.15"), _driver("n1", OLD, None, "580.173.02")])
    store.apply([NodeUpdate(node="gone", at=OLD, removed=True, keep_history=True)])
    assert store.history("gone") != []  # kept for "what did that node run?"

    # The removal was stamped when the batch landed (now): a cut-off after it drops the node.
    deleted = store.prune(datetime.now(UTC) + timedelta(days=1))

    assert deleted["nodes"] == 1
    assert store.history("gone") == []
    assert not store.node_exists("gone")
    assert [n.name for n in store.load()] == ["n1"]


def test_large_backlogs_are_deleted_in_batches_until_none_is_left(store: Store):
    store.apply([_driver("n1", OLD + timedelta(hours=h), None, f"5{h:02}.0") for h in range(7)])

    assert store.prune(CUTOFF, batch=3)["fact_changes"] == 7
    assert store.history("n1") == []


def test_retention_counts_what_it_pruned_and_off_prunes_nothing(store: Store):
    store.apply([_driver("n1", OLD, None, "570.86.15")])
    now = OLD + timedelta(days=181)

    off = Retention(store, StoreSettings(retention_days=None), lambda: True)
    assert asyncio.run(off.prune(now)) == {}
    assert len(store.history("n1")) == 1

    on = Retention(store, StoreSettings(retention_days=180), lambda: True)
    asyncio.run(on.prune(now))
    assert on.pruned["fact_changes"] == 1
    assert store.history("n1") == []
