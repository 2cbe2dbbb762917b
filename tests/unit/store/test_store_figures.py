"""Validation results keep the stack they were measured on, and `figures` reads back each
node's newest measured figures per check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from plumb.aggregator.store import Store
from plumb.aggregator.validation import CheckResult, PlannedCheck, ValidationRun
from plumb.aggregator.validation.model import Stack

T0 = datetime(2026, 7, 1, 3, 0, tzinfo=UTC)
H100 = Stack("a" * 64, "H100 SXM5", 8, "nvswitch")
CHECK = PlannedCheck("nccl-allreduce", "performance", "critical", "agent")


def _run(i: int, results: list[CheckResult]) -> ValidationRun:
    at = T0 + timedelta(hours=i)
    run = ValidationRun(f"{i:032x}", ("performance",), (CHECK,), ("n1",), at, 60.0, at)
    run.results = {(r.node, r.check_id): r for r in results}
    return run


def _result(i: int, value: float | None, status="pass", stack: Stack | None = H100):
    at = T0 + timedelta(hours=i)
    return CheckResult(
        "n1", "nccl-allreduce", "performance", "critical", status, "m", value, "GB/s",
        finished_at=at, stack=stack,
    )  # fmt: skip


def test_a_result_keeps_its_stack_through_the_store(store: Store):
    store.save_validation(_run(0, [_result(0, 460.0)]))
    (loaded,) = store.validation(f"{0:032x}").results.values()  # type: ignore[union-attr]
    assert loaded.stack == H100


def test_figures_are_the_two_newest_measured_ones_newest_first(store: Store):
    store.save_validation(_run(0, [_result(0, 470.0)]))
    store.save_validation(_run(1, [_result(1, 460.0)]))
    store.save_validation(_run(2, [_result(2, None, status="error")]))  # nothing measured
    store.save_validation(_run(3, [_result(3, 377.0)]))
    store.save_validation(_run(4, [_result(4, 999.0, stack=None)]))  # no stack: multi-node
    assert [(r.value, r.finished_at) for r in store.figures(per=2)] == [
        (377.0, T0 + timedelta(hours=3)),
        (460.0, T0 + timedelta(hours=1)),
    ]
