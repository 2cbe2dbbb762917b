"""The validation tables: runs and their results, written when a run starts and again when
it finishes.

Called by `Store` inside its connections and transactions; nothing else uses this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete, func, select
from sqlalchemy.sql.dml import Insert

from plumb.aggregator.validation.model import CheckResult, PlannedCheck, Stack, ValidationRun

from .models import ValidationResultRow, ValidationRunRow

_runs: Table = ValidationRunRow.__table__  # type: ignore[assignment]
_results: Table = ValidationResultRow.__table__  # type: ignore[assignment]

Upsert = Callable[[Table, Sequence[str], Sequence[str]], Insert]
_RUN_COLUMNS = (
    "created_at",
    "finished_at",
    "result",
    "deadline_s",
    "phases",
    "checks",
    "nodes",
    "replica",
)


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def save(conn: Connection, upsert: Upsert, run: ValidationRun, replica: str | None) -> None:
    """Write the run (run by `replica`) and replace its results, in the caller's transaction
    (idempotent)."""
    conn.execute(
        upsert(_runs, ["id"], _RUN_COLUMNS),
        {
            "id": run.id,
            "created_at": run.created_at,
            "finished_at": run.finished_at,
            "result": run.result,
            "deadline_s": run.deadline_s,
            "phases": _dumps(list(run.phases)),
            "checks": _dumps([c.__dict__ for c in run.checks]),
            "nodes": _dumps(list(run.nodes)),
            "replica": replica,
        },
    )
    conn.execute(delete(_results).where(_results.c.run_id == run.id))
    if run.results:
        conn.execute(_results.insert(), [_result_params(run.id, r) for r in run.ordered()])


def load(conn: Connection, run_id: str) -> ValidationRun | None:
    row = conn.execute(select(_runs).where(_runs.c.id == run_id)).first()
    if row is None:
        return None
    run = ValidationRun(
        id=row.id,
        phases=tuple(json.loads(row.phases)),
        checks=tuple(PlannedCheck(**c) for c in json.loads(row.checks)),
        nodes=tuple(json.loads(row.nodes)),
        created_at=row.created_at,
        deadline_s=row.deadline_s,
        finished_at=row.finished_at,
    )
    for r in conn.execute(select(_results).where(_results.c.run_id == run_id)).all():
        run.results[(r.node, r.check_id)] = _result(r)
    return run


def figures(conn: Connection, per: int) -> list[CheckResult]:
    """The `per` newest measured figures of each (node, check): results with a value and
    the stack they were measured on, not errors or skips; by node, check, newest first."""
    c = _results.c
    newest = (
        func.row_number()
        .over(partition_by=(c.node, c.check_id), order_by=(c.finished_at.desc(), c.run_id))
        .label("newest")
    )
    measured = (
        select(_results, newest)
        .where(
            c.value.is_not(None),
            c.stack_hash.is_not(None),
            c.finished_at.is_not(None),
            c.status.in_(("pass", "warn", "fail")),
        )
        .subquery()
    )
    stmt = (
        select(measured)
        .where(measured.c.newest <= per)
        .order_by(measured.c.node, measured.c.check_id, measured.c.newest)
    )
    return [_result(r) for r in conn.execute(stmt).all()]


def _result(r: Any) -> CheckResult:
    stack = None
    if r.stack_hash is not None:
        stack = Stack(r.stack_hash, r.gpu_model or "", r.gpu_count or 0, r.fabric or "")
    return CheckResult(
        node=r.node,
        check_id=r.check_id,
        phase=r.phase,
        severity=r.severity,
        status=r.status,
        message=r.message,
        value=r.value,
        unit=r.unit,
        threshold=r.threshold,
        peak=r.peak,
        ratio_to_peak=r.ratio_to_peak,
        duration_s=r.duration_s,
        details=json.loads(r.details),
        remediation=r.remediation,
        finished_at=r.finished_at,
        stack=stack,
    )


def unfinished(conn: Connection) -> list[tuple[str, str | None]]:
    """(id, replica) of every run stored as started and never finished."""
    stmt = select(_runs.c.id, _runs.c.replica).where(_runs.c.finished_at.is_(None))
    return [(row.id, row.replica) for row in conn.execute(stmt).all()]


def recent_ids(conn: Connection, limit: int) -> list[str]:
    stmt = select(_runs.c.id).order_by(_runs.c.created_at.desc()).limit(limit)
    return [row.id for row in conn.execute(stmt).all()]


def _result_params(run_id: str, r: CheckResult) -> dict[str, object]:
    return {
        "run_id": run_id,
        "node": r.node,
        "check_id": r.check_id,
        "phase": r.phase,
        "severity": r.severity,
        "status": r.status,
        "message": r.message,
        "value": r.value,
        "unit": r.unit,
        "threshold": r.threshold,
        "peak": r.peak,
        "ratio_to_peak": r.ratio_to_peak,
        "duration_s": r.duration_s,
        "details": _dumps(dict(r.details)),
        "remediation": r.remediation,
        "finished_at": r.finished_at,
        "stack_hash": r.stack.hash if r.stack else None,
        "gpu_model": r.stack.model if r.stack else None,
        "gpu_count": r.stack.gpus if r.stack else None,
        "fabric": r.stack.fabric if r.stack else None,
    }
