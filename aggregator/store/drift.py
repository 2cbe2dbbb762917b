"""The drift tables: finding lifetimes and accepted baselines, read and written in SQL.

Called by `Store` inside its connections and transactions; nothing else uses this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import Connection, Table, bindparam, select, update
from sqlalchemy.sql.dml import Insert

from aggregator.drift.engine import Baseline
from aggregator.drift.model import DriftFinding
from plumb.facts import Reading

from .models import BaselineRow, DriftFindingRow

_findings: Table = DriftFindingRow.__table__  # type: ignore[assignment]
_baselines: Table = BaselineRow.__table__  # type: ignore[assignment]

Upsert = Callable[[Table, Sequence[str], Sequence[str]], Insert]


def write(
    conn: Connection,
    upsert: Upsert,
    opened: Sequence[DriftFinding],
    closed: Sequence[DriftFinding],
    baselines: Sequence[tuple[str, Baseline]],
) -> None:
    """Insert opened findings, stamp closed ones, and replace baselines, in the caller's tx."""
    if opened:
        # Idempotent: a batch retried after a lost commit acknowledgement must not fail.
        conn.execute(upsert(_findings, ["id"], []), [_finding_params(f) for f in opened])
    if closed:
        conn.execute(
            update(_findings)
            .where(_findings.c.id == bindparam("b_id"))
            .values(closed_at=bindparam("b_closed_at")),
            [{"b_id": f.id, "b_closed_at": f.closed_at} for f in closed],
        )
    if baselines:
        conn.execute(
            upsert(_baselines, ["node"], ["facts", "gpu_count", "accepted_at"]),
            [
                {
                    "node": node,
                    "facts": json.dumps(
                        {p: r.to_json() for p, r in sorted(b.facts.items())},
                        separators=(",", ":"),
                    ),
                    "gpu_count": b.gpu_count,
                    "accepted_at": b.accepted_at,
                }
                for node, b in baselines
            ],
        )


def load_open(conn: Connection) -> list[DriftFinding]:
    """Every finding not yet closed."""
    rows = conn.execute(select(_findings).where(_findings.c.closed_at.is_(None))).all()
    return [_finding(row) for row in rows]


def load_baselines(conn: Connection) -> dict[str, Baseline]:
    """Every node's accepted baseline."""
    out = {}
    for row in conn.execute(select(_baselines)).all():
        facts = {
            path: Reading(doc["status"], doc.get("value"), doc.get("error"))
            for path, doc in json.loads(row.facts).items()
        }
        out[row.node] = Baseline(facts, row.gpu_count, row.accepted_at)
    return out


def query(
    conn: Connection,
    *,
    node: str | None,
    kind: str | None,
    severity: str | None,
    component: str | None,
    since: datetime | None,
    limit: int,
) -> list[DriftFinding]:
    """Findings open or closed, newest opened first, filtered; `since` on opened or closed."""
    stmt = select(_findings).order_by(_findings.c.opened_at.desc(), _findings.c.id).limit(limit)
    for column, value in (
        (_findings.c.node, node),
        (_findings.c.kind, kind),
        (_findings.c.severity, severity),
        (_findings.c.component, component),
    ):
        if value is not None:
            stmt = stmt.where(column == value)
    if since is not None:
        stmt = stmt.where((_findings.c.opened_at >= since) | (_findings.c.closed_at >= since))
    return [_finding(row) for row in conn.execute(stmt).all()]


def _finding_params(f: DriftFinding) -> dict[str, object]:
    return {
        "id": f.id,
        "node": f.node,
        "kind": f.kind,
        "component": f.component,
        "expected": f.expected,
        "observed": f.observed,
        "severity": f.severity,
        "remediation": f.remediation,
        "recipe_hash": f.recipe_hash,
        "opened_at": f.opened_at,
        "closed_at": f.closed_at,
    }


def _finding(row) -> DriftFinding:  # noqa: ANN001 - a SQLAlchemy Row
    return DriftFinding(
        id=row.id,
        node=row.node,
        kind=row.kind,
        component=row.component,
        expected=row.expected,
        observed=row.observed,
        severity=row.severity,
        remediation=row.remediation,
        recipe_hash=row.recipe_hash,
        opened_at=row.opened_at,
        closed_at=row.closed_at,
    )
