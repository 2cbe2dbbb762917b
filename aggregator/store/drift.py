"""The drift tables: finding lifetimes and accepted baselines, read and written in SQL.

Called by `Store` inside its connections and transactions; nothing else uses this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import orjson
from sqlalchemy import Connection, Table, bindparam, delete, select, update
from sqlalchemy.sql.dml import Insert

from plumb.aggregator.drift.engine import Baseline
from plumb.aggregator.drift.model import DriftFinding
from plumb.facts import Reading

from .models import BaselineRow, DriftFindingRow

_findings: Table = DriftFindingRow.__table__  # type: ignore[assignment]
_baselines: Table = BaselineRow.__table__  # type: ignore[assignment]

Upsert = Callable[[Table, Sequence[str], Sequence[str]], Insert]


def write(
    conn: Connection,
    upsert: Upsert,
    dialect_insert: Callable[[Table], Insert],
    transitions: Sequence[tuple[Sequence[DriftFinding], Sequence[DriftFinding]]],
    baselines: Sequence[tuple[str, Baseline]],
) -> None:
    """Write each update's (opened, closed) findings in order, and replace baselines.

    Several replicas evaluate one node, so each may open or close the same finding: the
    unique index on open findings keeps one row per (node, kind, component), an open that
    finds one already there is skipped, and a close ends the open row with the same content,
    whichever replica inserted it. Closes go before opens and, when a key repeats, in order.
    """
    opened: list[DriftFinding] = []
    closed: list[DriftFinding] = []
    keys: set[tuple[str, str, str]] = set()
    for o, c in transitions:
        touched = {(f.node, f.kind, f.component) for f in (*o, *c)}
        if touched & keys:
            _write_findings(conn, dialect_insert, opened, closed)
            opened, closed, keys = [], [], set()
        opened.extend(o)
        closed.extend(c)
        keys |= touched
    _write_findings(conn, dialect_insert, opened, closed)
    if baselines:
        conn.execute(
            upsert(_baselines, ["node"], ["facts", "gpu_count", "accepted_at"]),
            [
                {
                    "node": node,
                    "facts": orjson.dumps(
                        {p: r.to_json() for p, r in b.facts.items()}, option=orjson.OPT_SORT_KEYS
                    ).decode(),
                    "gpu_count": b.gpu_count,
                    "accepted_at": b.accepted_at,
                }
                for node, b in baselines
            ],
        )


def _write_findings(
    conn: Connection,
    dialect_insert: Callable[[Table], Insert],
    opened: Sequence[DriftFinding],
    closed: Sequence[DriftFinding],
) -> None:
    c = _findings.c
    if closed:
        conn.execute(
            update(_findings)
            .where(
                c.node == bindparam("b_node"),
                c.kind == bindparam("b_kind"),
                c.component == bindparam("b_component"),
                c.expected == bindparam("b_expected"),
                c.observed == bindparam("b_observed"),
                c.severity == bindparam("b_severity"),
                c.closed_at.is_(None),
            )
            .values(closed_at=bindparam("b_closed_at")),
            [{f"b_{k}": v for k, v in _finding_params(f).items()} for f in closed],
        )
    if opened:
        # Also idempotent for a batch retried after a lost commit acknowledgement.
        conn.execute(
            dialect_insert(_findings).on_conflict_do_nothing(),
            [_finding_params(f) for f in opened],
        )


def forget_baselines(conn: Connection, nodes: Sequence[str]) -> None:
    """Drop the baselines of removed nodes (their findings stay, closed, with the history)."""
    conn.execute(delete(_baselines).where(_baselines.c.node.in_(nodes)))


def load_open(conn: Connection) -> list[DriftFinding]:
    """Every finding not yet closed."""
    rows = conn.execute(select(_findings).where(_findings.c.closed_at.is_(None))).all()
    return [_finding(row) for row in rows]


def open_since(conn: Connection, since: datetime) -> list[DriftFinding]:
    """Findings opened at or after `since` and still open (by the opened_at index)."""
    c = _findings.c
    stmt = select(_findings).where(c.opened_at >= since, c.closed_at.is_(None))
    return [_finding(row) for row in conn.execute(stmt).all()]


def load_baselines(conn: Connection, nodes: Sequence[str] | None = None) -> dict[str, Baseline]:
    """Every node's accepted baseline, or those of `nodes`.

    Nodes accept mostly the same readings, so each distinct one is built once and shared, as
    `Store.load` shares the facts' (a restart at 10,000 nodes spent a quarter of its load
    building ~610,000 of them). Keyed by the value's type too: True and 1 are equal keys,
    and so are 0.0 and -0.0 (floats go by their bits).
    """
    stmt = select(_baselines)
    if nodes is not None:
        stmt = stmt.where(_baselines.c.node.in_(nodes))
    out = {}
    shared: dict[tuple, Reading] = {}
    path_of = {}.setdefault
    for row in conn.execute(stmt).all():
        facts = {}
        for path, doc in orjson.loads(row.facts).items():
            status, value, error = doc["status"], doc.get("value"), doc.get("error")
            kind = value.__class__
            key = (status, kind, value.hex() if kind is float else value, error)
            reading = shared.get(key)
            if reading is None:
                reading = shared[key] = Reading(status, value, error)
            facts[path_of(path, path)] = reading
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
