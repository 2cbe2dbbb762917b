"""Runs stored as started and never finished are finished as errors by the next start-up,
unless a live peer replica runs them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from plumb.aggregator.store import Store
from plumb.aggregator.validation.model import CheckResult, PlannedCheck, ValidationRun

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CHECKS = (
    PlannedCheck("ecc", "conformance", "critical", "agent"),
    PlannedCheck("nodes-ready", "conformance", "critical", "kubernetes"),
)


def _started(run_id: str) -> ValidationRun:
    return ValidationRun(
        id=run_id,
        phases=("conformance",),
        checks=CHECKS,
        nodes=("a", "b"),
        created_at=T0,
        deadline_s=60,
    )


def test_a_run_of_a_replica_gone_or_of_this_name_is_finished_and_a_live_peers_is_not(url):
    gone, peer, me = (
        Store(url, replica="gone"),
        Store(url, replica="peer"),
        Store(url, replica="me"),
    )
    try:
        half = _started("1" * 32)
        half.results[("a", "ecc")] = CheckResult(
            "a", "ecc", "conformance", "critical", "pass", "no ECC errors", finished_at=T0
        )
        gone.save_validation(half)
        me.save_validation(_started("2" * 32))  # a previous life under the same name
        peer.save_validation(_started("3" * 32))
        peer.see_replica(T0 + timedelta(seconds=55))

        at = T0 + timedelta(seconds=60)
        assert sorted(me.finish_interrupted_validations(at, alive_s=10)) == ["1" * 32, "2" * 32]

        run = me.validation("1" * 32)
        assert run is not None and run.finished_at == at and run.result == "failed"
        # a, b for ecc; one cluster-wide result for nodes-ready: the pass kept, 2 errors added.
        assert {(k, r.status, r.message) for k, r in run.results.items()} == {
            (("a", "ecc"), "pass", "no ECC errors"),
            (("b", "ecc"), "error", "aggregator restarted"),
            (("(cluster)", "nodes-ready"), "error", "aggregator restarted"),
        }
        running = me.validation("3" * 32)
        assert running is not None and running.finished_at is None and not running.results
        assert {r.id for r in me.validations()} == {"1" * 32, "2" * 32, "3" * 32}
    finally:
        for store in (gone, peer, me):
            store.close()
