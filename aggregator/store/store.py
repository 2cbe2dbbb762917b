"""The store: nodes, their current facts and every fact change, in SQLite or PostgreSQL.

Synchronous on purpose: callers run it through ``asyncio.to_thread``, and the writer
gathers many stream events into one transaction. ORM rows never leave this module; the
rest of the aggregator gets the frozen dataclasses below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby
from pathlib import Path
from typing import Any, get_args

import orjson
from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    Select,
    Table,
    case,
    create_engine,
    delete,
    event,
    insert,
    select,
    text,
)
from sqlalchemy import update as sql_update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from plumb.aggregator.drift.engine import Baseline
from plumb.aggregator.drift.model import DriftFinding
from plumb.aggregator.validation.model import CheckResult, ValidationRun
from plumb.facts import MAX_VALUE_CHARS, Reading, Status, own_paths

from . import drift, validation
from .lock import WriterLock, WriterLockHeld
from .models import (
    CONTENT_HASH_CHARS,
    IDENTITY_CHARS,
    NODE_NAME_CHARS,
    PATH_CHARS,
    DriftFindingRow,
    FactChangeRow,
    NodeFactsRow,
    NodeRow,
    ReplicaRow,
    ValidationRunRow,
)

__all__ = [
    "Change",
    "HistoryEntry",
    "NodeUpdate",
    "Store",
    "StoreError",
    "StoredNode",
    "migrate",
]

_MIGRATIONS = Path(__file__).with_name("migrations")
# Replicas starting together on one PostgreSQL take this advisory lock to migrate in turn.
_MIGRATION_LOCK_KEY = 0x706C756D62  # "plumb"
_STATUSES = frozenset(get_args(Status))
_NODE_FIELDS = ("connected", "boot_id", "agent_version", "last_report_at", "content_hash")
_SQLITE_BUSY_TIMEOUT_MS = 5000  # a writer waits this long for another's lock before failing
_LOAD_CHUNK = 500  # node_facts rows fetched at a time by `load`
_RESTS_MAX = 512  # distinct `rest` documents a load keeps decoded (~50 KiB each with its text)

_nodes: Table = NodeRow.__table__  # type: ignore[assignment]
_facts: Table = NodeFactsRow.__table__  # type: ignore[assignment]
_changes: Table = FactChangeRow.__table__  # type: ignore[assignment]
_replicas: Table = ReplicaRow.__table__  # type: ignore[assignment]
_findings: Table = DriftFindingRow.__table__  # type: ignore[assignment]
_runs: Table = ValidationRunRow.__table__  # type: ignore[assignment]
# A replica unseen this long is forgotten: its row only said it was once alive.
_REPLICA_FORGET = timedelta(days=1)


@dataclass(frozen=True)
class Change:
    """One fact transition: ``old`` None means the fact is new, ``new`` None that it is gone."""

    path: str
    old: Reading | None
    new: Reading | None


@dataclass(frozen=True)
class NodeUpdate:
    """What one stream event changes for a node; applied in one transaction.

    ``None`` in an optional field means unchanged.
    """

    node: str
    at: datetime
    # What changed, for the history; `facts` must then be given.
    changes: tuple[Change, ...] = ()
    connected: bool | None = None
    boot_id: str | None = None
    agent_version: str | None = None
    last_report_at: datetime | None = None
    # The node's facts once this update applies, stored whole in place of those held: a
    # node's first facts come with no `changes`, as they start its history, not change it.
    facts: Mapping[str, Reading] | None = None
    # Whether `facts` are the agent's own, unchanged by the cluster's overlay; only with
    # `facts`, and stored as unknown when they come without it.
    facts_own: bool | None = None
    # The content hash of the agent's own facts.
    content_hash: str | None = None
    # Drift transitions decided for this node, and its newly accepted baseline.
    opened: tuple[DriftFinding, ...] = ()
    closed: tuple[DriftFinding, ...] = ()
    baseline: Baseline | None = None
    # The node is forgotten, after this update's own changes: its facts and baseline go, and
    # its history and findings too unless `keep_history` (then its row stays, marked removed,
    # for the history to hang on; without it the row goes and the schema cascades).
    removed: bool = False
    keep_history: bool = True


@dataclass(frozen=True)
class StoredNode:
    """A node's row; ``facts`` empty where only the row was read (``changed_nodes``)."""

    name: str
    connected: bool
    boot_id: str | None
    agent_version: str | None
    first_seen_at: datetime
    last_report_at: datetime | None
    facts: dict[str, Reading]
    # None for rows from before the column existed: hash `facts` then.
    content_hash: str | None = None
    # True when `facts` are the agent's own (no cluster overlay), which `content_hash`
    # covers; None when unknown.
    facts_own: bool | None = None
    # The replica holding (or last holding) its stream, the replica that last wrote the row
    # and when, when its facts last changed, and when and by which replica its baseline did.
    owner: str | None = None
    changed_by: str | None = None
    changed_at: datetime | None = None
    facts_changed_at: datetime | None = None
    baseline_changed_at: datetime | None = None
    baseline_changed_by: str | None = None
    # Removed (`plumb node rm`, expiry) by the replica `changed_by`; only `changed_nodes`
    # returns such rows, so that the other replicas forget the node too.
    removed: bool = False


@dataclass(frozen=True)
class HistoryEntry:
    path: str
    old: Reading | None
    new: Reading | None
    at: datetime


class StoreError(Exception):
    """A store operation failed.

    ``retryable`` is True when the database itself is unavailable (down, unreachable,
    locked), so the same call may succeed later; False when the input or the schema is
    wrong and retrying cannot help.
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class Store:
    """Nodes, current facts and fact history in SQL. Sync; callers run it via asyncio.to_thread."""

    def __init__(self, url: str, *, replica: str | None = None, exclusive: bool = False) -> None:
        """Connects to ``url`` and upgrades its schema to the latest migration.

        ``replica`` names this process among several sharing the database: it is written as
        the owner of the nodes whose streams it opens and as the writer of every node row.
        ``exclusive``: on SQLite, hold the file's writer lock (store/lock.py) until `close`,
        so a second aggregator on the same file fails here, naming the file and this process.
        """
        self._replica = replica
        self._engine = _create_engine(url)
        self._lock: WriterLock | None = None
        try:
            if exclusive and self._engine.dialect.name == "sqlite":
                self._lock = _writer_lock(self._engine)
            _upgrade(self._engine)
        except StoreError:
            self.close()
            raise
        self._dialect_insert = (
            postgresql.insert if self._engine.dialect.name == "postgresql" else sqlite.insert
        )
        self._facts_upsert = self._upsert(_facts, ["node"], ["own", "rest"])

    def load(self) -> list[StoredNode]:
        """Every node with its current facts, for the aggregator's start.

        Nodes come back disconnected whatever the table says: no stream is open yet.
        """
        with _errors("loading nodes", self._engine), self._engine.connect() as conn:
            facts = _load_facts(conn, select(_facts.c.node, _facts.c.own, _facts.c.rest))
            live = _nodes.c.removed_at.is_(None)
            nodes = conn.execute(select(_nodes).where(live).order_by(_nodes.c.name)).all()
        return [_stored(row, facts.get(row.name, {}), connected=False) for row in nodes]

    def changed_nodes(self, since: datetime | None) -> list[StoredNode]:
        """Node rows (without facts) written at or after ``since``, removals included; every
        live row when None."""
        stmt = select(_nodes).order_by(_nodes.c.name)
        if since is None:
            stmt = stmt.where(_nodes.c.removed_at.is_(None))
        else:
            stmt = stmt.where(_nodes.c.changed_at >= since)
        with _errors("reading changed nodes", self._engine), self._engine.connect() as conn:
            return [_stored(row, {}, connected=row.connected) for row in conn.execute(stmt)]

    def contents(
        self, facts_of: Sequence[str], baselines_of: Sequence[str]
    ) -> tuple[dict[str, dict[str, Reading]], dict[str, Baseline]]:
        """The current facts of ``facts_of`` and the baselines of ``baselines_of``."""
        stmt = select(_facts.c.node, _facts.c.own, _facts.c.rest).where(_facts.c.node.in_(facts_of))
        facts: dict[str, dict[str, Reading]] = {name: {} for name in facts_of}
        with _errors("reading node facts", self._engine), self._engine.connect() as conn:
            if facts_of:
                facts.update(_load_facts(conn, stmt))
            baselines = drift.load_baselines(conn, baselines_of) if baselines_of else {}
        return facts, baselines

    def see_replica(self, at: datetime) -> dict[str, datetime]:
        """Record that this replica is alive ``at``; when each replica was last seen."""
        if self._replica is None:
            raise StoreError("see_replica needs Store(replica=...)", retryable=False)
        with _errors("recording a replica", self._engine), self._engine.begin() as conn:
            conn.execute(
                self._upsert(_replicas, ["name"], ["seen_at"]),
                {"name": self._replica, "seen_at": at},
            )
            conn.execute(delete(_replicas).where(_replicas.c.seen_at < at - _REPLICA_FORGET))
            return {row.name: row.seen_at for row in conn.execute(select(_replicas))}

    def apply(self, updates: Sequence[NodeUpdate]) -> int:
        """Writes ``updates`` in one transaction and returns the number of change rows written.

        Invalid input raises a non-retryable StoreError before anything is written.
        """
        for update in updates:
            _check(update)
        if not updates:
            return 0
        now = datetime.now(UTC)  # when the batch lands, not when it was queued: tails read it
        written = 0
        with _errors("writing node updates", self._engine), self._engine.begin() as conn:
            # A removal applies after what precedes it in the queue and before what follows.
            for removal, run in groupby(updates, key=lambda u: u.removed):
                run = list(run)
                written += self._apply_run(conn, run, now)
                if removal:
                    self._remove(conn, run, now)
        return written

    def _remove(self, conn: Connection, removals: list[NodeUpdate], now: datetime) -> None:
        """Every removed node leaves its row, marked removed, for other replicas to see (and
        retention to delete later); its history and findings go too unless kept."""
        names = [u.node for u in removals]
        dropped = [u.node for u in removals if not u.keep_history]
        if dropped:
            conn.execute(delete(_changes).where(_changes.c.node.in_(dropped)))
            conn.execute(delete(_findings).where(_findings.c.node.in_(dropped)))
        conn.execute(delete(_facts).where(_facts.c.node.in_(names)))
        drift.forget_baselines(conn, names)
        conn.execute(
            sql_update(_nodes)
            .where(_nodes.c.name.in_(names))
            .values(
                removed_at=now,
                connected=False,
                content_hash=None,
                facts_own=None,
                changed_by=self._replica,
                changed_at=now,
            )
        )

    def _apply_run(self, conn: Connection, updates: list[NodeUpdate], now: datetime) -> int:
        """Write one run of updates; the number of change rows written."""
        changes = [(u, c) for u in updates for c in u.changes]
        # Consecutive runs of the same kind go as one executemany; order is kept.
        for shape, group in groupby(updates, key=_node_shape):
            conn.execute(self._upsert_nodes(shape), [self._node_params(u, now) for u in group])
        docs = [{"node": u.node, **_facts_docs(u.facts)} for u in updates if u.facts is not None]
        if docs:
            conn.execute(self._facts_upsert, docs)
        rows = [_change_params(u, c) for u, c in changes]
        if rows:
            conn.execute(insert(_changes), rows)
        drift.write(
            conn,
            self._upsert,
            self._dialect_insert,
            [(u.opened, u.closed) for u in updates if u.opened or u.closed],
            [(u.node, u.baseline) for u in updates if u.baseline is not None],
        )
        return len(rows)

    def load_drift(self) -> tuple[list[DriftFinding], dict[str, Baseline]]:
        """Open drift findings and every baseline, for the aggregator's start."""
        with _errors("loading drift", self._engine), self._engine.connect() as conn:
            return drift.load_open(conn), drift.load_baselines(conn)

    def findings_opened_since(self, since: datetime) -> list[DriftFinding]:
        """Open drift findings opened at or after ``since``, whichever replica stored them."""
        with _errors("reading new drift findings", self._engine), self._engine.connect() as conn:
            return drift.open_since(conn, since)

    def findings(
        self,
        *,
        node: str | None = None,
        kind: str | None = None,
        severity: str | None = None,
        component: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[DriftFinding]:
        """Drift findings, closed ones included, newest opened first."""
        with _errors("reading drift findings", self._engine), self._engine.connect() as conn:
            return drift.query(
                conn,
                node=node,
                kind=kind,
                severity=severity,
                component=component,
                since=since,
                limit=limit,
            )

    def history(
        self, node: str, since: datetime | None = None, limit: int = 100
    ) -> list[HistoryEntry]:
        """The fact changes of ``node`` at or after ``since``, newest first, at most ``limit``."""
        if limit < 0:
            raise ValueError("limit must not be negative")
        stmt = (
            select(_changes.c.path, _changes.c.old, _changes.c.new, _changes.c.at)
            .where(_changes.c.node == node)
            .order_by(_changes.c.at.desc(), _changes.c.id.desc())
            .limit(limit)
        )
        if since is not None:
            stmt = stmt.where(_changes.c.at >= since)
        with _errors("reading history", self._engine), self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [
            HistoryEntry(row.path, _reading(row.old), _reading(row.new), row.at) for row in rows
        ]

    def fleet_history(
        self, since: datetime, until: datetime, path_like: str | None = None, limit: int = 100_000
    ) -> list[tuple[str, HistoryEntry]]:
        """Every node's fact changes in [since, until], oldest first, at most ``limit``;
        ``path_like`` is a SQL LIKE pattern (escape character backslash) on the path."""
        c = _changes.c
        stmt = (
            select(c.node, c.path, c.old, c.new, c.at)
            .where(c.at >= since, c.at <= until)
            .order_by(c.at, c.id)
            .limit(limit)
        )
        if path_like is not None:
            stmt = stmt.where(c.path.like(path_like, escape="\\"))
        with _errors("reading the fleet's history", self._engine), self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [
            (row.node, HistoryEntry(row.path, _reading(row.old), _reading(row.new), row.at))
            for row in rows
        ]

    def prune(self, before: datetime, batch: int = 5000) -> dict[str, int]:
        """Delete what retention drops: history rows, closed findings and finished validation
        runs from before ``before``, and nodes removed before it (with all they kept). Open
        findings, baselines and current facts are live state and stay whatever their age.

        Deletes go ``batch`` rows per transaction, so the writer never waits long for the
        lock; returns the rows deleted per table.
        """
        f, r = _findings.c, _runs.c
        targets = {
            "fact_changes": (_changes.c.id, _changes.c.at < before),
            "drift_findings": (f.id, f.closed_at.is_not(None) & (f.closed_at < before)),
            "validation_runs": (r.id, r.finished_at.is_not(None) & (r.finished_at < before)),
            "nodes": (
                _nodes.c.name,
                _nodes.c.removed_at.is_not(None) & (_nodes.c.removed_at < before),
            ),
        }
        deleted = {}
        with _errors("pruning old history", self._engine):
            for table, (key, old) in targets.items():
                deleted[table] = 0
                while True:
                    with self._engine.begin() as conn:
                        chunk = select(key).where(old).limit(batch)
                        n = conn.execute(delete(key.table).where(key.in_(chunk))).rowcount
                    deleted[table] += n
                    if n < batch:
                        break
        return deleted

    def save_validation(self, run: ValidationRun) -> None:
        """Write a validation run and its results (again, replacing them, if already there)."""
        with _errors("writing a validation run", self._engine), self._engine.begin() as conn:
            validation.save(conn, self._upsert, run, self._replica)

    def finish_interrupted_validations(self, at: datetime, alive_s: float) -> list[str]:
        """Finish, as `error: aggregator restarted`, every run stored as started whose replica
        is this one's name (a previous life of it) or was not seen within `alive_s`; their ids.

        Called once at start-up, before this process starts runs of its own; runs of live
        peers sharing the database are left to them.
        """
        with (
            _errors("finishing interrupted validations", self._engine),
            self._engine.begin() as conn,
        ):
            seen = {row.name: row.seen_at for row in conn.execute(select(_replicas))}
            live = {name for name, t in seen.items() if at - t <= timedelta(seconds=alive_s)}
            done = []
            for run_id, replica in validation.unfinished(conn):
                if replica in live and replica != self._replica:
                    continue
                run = validation.load(conn, run_id)
                if run is None:
                    continue
                run.cut_short("aggregator restarted", at)
                validation.save(conn, self._upsert, run, replica)
                done.append(run_id)
            return done

    def validations(self, limit: int = 20) -> list[ValidationRun]:
        """The newest stored validation runs, with their results, newest first."""
        with _errors("listing validation runs", self._engine), self._engine.connect() as conn:
            runs = (validation.load(conn, run_id) for run_id in validation.recent_ids(conn, limit))
            return [run for run in runs if run is not None]

    def figures(self, per: int = 2) -> list[CheckResult]:
        """The `per` newest measured figures of every (node, check), with the stack each was
        measured on: what the fleet's baselines are learned from."""
        with _errors("reading benchmark figures", self._engine), self._engine.connect() as conn:
            return validation.figures(conn, per)

    def validation(self, run_id: str) -> ValidationRun | None:
        """A stored validation run with its results, or None."""
        with _errors("reading a validation run", self._engine), self._engine.connect() as conn:
            return validation.load(conn, run_id)

    def node_exists(self, node: str) -> bool:
        """Whether ``node`` has ever reported."""
        stmt = select(_nodes.c.name).where(_nodes.c.name == node)
        with _errors("looking up a node", self._engine), self._engine.connect() as conn:
            return conn.execute(stmt).first() is not None

    def ping(self) -> None:
        """Raises StoreError unless the database answers; backs the readiness probe."""
        with _errors("pinging the database", self._engine), self._engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def close(self) -> None:
        """Closes every pooled connection, then lets go of the writer lock."""
        self._engine.dispose()
        if self._lock is not None:
            self._lock.release()

    def _upsert(self, table: Table, keys: Sequence[str], update: Sequence[str]) -> Insert:
        """INSERT ... ON CONFLICT (keys) DO UPDATE the ``update`` columns (both dialects)."""
        stmt = self._dialect_insert(table)
        if not update:
            return stmt.on_conflict_do_nothing(index_elements=keys)
        return stmt.on_conflict_do_update(
            index_elements=keys, set_={col: stmt.excluded[col] for col in update}
        )

    def _upsert_nodes(self, shape: tuple[str, ...]) -> Insert:
        stmt = self._dialect_insert(_nodes)
        if not shape:
            return stmt.on_conflict_do_nothing(index_elements=["name"])
        columns = {col: stmt.excluded[col] for col in shape}
        # A removed name that reports again is a node seen for the first time.
        c = _nodes.c
        columns["first_seen_at"] = case(
            (c.removed_at.is_not(None), stmt.excluded.first_seen_at), else_=c.first_seen_at
        )
        # A disconnect applies only while this replica holds the node: the agent may already
        # have reconnected to another one, whose row must stand.
        holder = "connected" in shape and "owner" not in shape
        return stmt.on_conflict_do_update(
            index_elements=["name"],
            set_=columns,
            where=c.owner.is_not_distinct_from(stmt.excluded.owner) if holder else None,
        )

    def _node_params(self, update: NodeUpdate, now: datetime) -> dict[str, object]:
        return {
            "name": update.node,
            "first_seen_at": update.at,
            "connected": bool(update.connected),
            "boot_id": update.boot_id,
            "agent_version": update.agent_version,
            "last_report_at": update.last_report_at,
            "content_hash": update.content_hash,
            "facts_own": update.facts_own,
            "owner": self._replica,
            "changed_by": self._replica,
            "changed_at": now,
            "removed_at": None,
            "facts_changed_at": now if update.facts is not None else None,
            "baseline_changed_at": now if update.baseline else None,
            "baseline_changed_by": self._replica if update.baseline else None,
        }


def migrate(url: str) -> None:
    """Upgrades the database at ``url`` to the latest schema; a no-op when it is there."""
    engine = _create_engine(url)
    try:
        _upgrade(engine)
    finally:
        engine.dispose()


def _create_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"invalid database URL: {exc}", retryable=False) from exc
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return create_engine(parsed, pool_pre_ping=True)
    if backend != "sqlite":
        raise StoreError(
            f"unsupported database {backend!r}: use sqlite:///PATH or postgresql+psycopg://...",
            retryable=False,
        )
    if parsed.database in (None, "", ":memory:"):
        raise StoreError(
            "an in-memory SQLite database lives in one connection: use sqlite:///PATH",
            retryable=False,
        )
    engine = create_engine(parsed)
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _writer_lock(engine: Engine) -> WriterLock:
    database = Path(engine.url.database or "").absolute()
    try:
        return WriterLock(database)
    except WriterLockHeld as exc:
        raise StoreError(str(exc), retryable=False) from exc
    except OSError as exc:
        raise StoreError(f"cannot lock {database}: {exc}", retryable=False) from exc


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # pysqlite's own transaction handling skips DDL and delays BEGIN; emit BEGIN ourselves
    # (see _sqlite_begin) so migrations and batches are atomic.
    dbapi_conn.isolation_level = None
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN")


def _upgrade(engine: Engine) -> None:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with _errors("migrating the schema", engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        config.attributes["connection"] = conn
        try:
            command.upgrade(config, "head")
        except CommandError as exc:
            raise StoreError(
                f"migrating the schema failed: {exc}; is the database from a newer Plumb?",
                retryable=False,
            ) from exc


@contextmanager
def _errors(action: str, engine: Engine) -> Iterator[None]:
    """Wraps SQLAlchemy errors in StoreError, saying what failed, where, and what to check."""
    try:
        yield
    except SQLAlchemyError as exc:
        retryable = isinstance(
            exc, OperationalError | InterfaceError | DisconnectionError | PoolTimeoutError
        ) or (isinstance(exc, DBAPIError) and exc.connection_invalidated)
        cause = getattr(exc, "orig", None) or exc
        hint = (
            "check that the database is up, reachable and not locked by another process"
            if retryable
            else "check the input and that the schema is at the latest migration"
        )
        where = engine.url.render_as_string(hide_password=True)
        detail = str(cause).splitlines()[0][:300] if str(cause) else ""
        raise StoreError(
            f"{action} failed on {where}: {type(cause).__name__}: {detail}; {hint}",
            retryable=retryable,
        ) from exc


def _check(update: NodeUpdate) -> None:
    """Rejects what SQLite would store but PostgreSQL would refuse, and malformed updates."""
    problem = _problem(update)
    if problem is not None:
        node = update.node if isinstance(update.node, str) else repr(update.node)
        raise StoreError(f"invalid update for node {node[:64]}: {problem}", retryable=False)


def _problem(update: NodeUpdate) -> str | None:
    if not _text_ok(update.node, NODE_NAME_CHARS) or not update.node:
        return f"node name must be 1 to {NODE_NAME_CHARS} characters, without NUL"
    for name in ("at", "last_report_at"):
        value = getattr(update, name)
        if (value is not None or name == "at") and not (
            isinstance(value, datetime) and value.tzinfo is not None
        ):
            return f"{name} must be a tz-aware datetime"
    for name in ("boot_id", "agent_version"):
        value = getattr(update, name)
        if value is not None and not _text_ok(value, IDENTITY_CHARS):
            return f"{name} must be at most {IDENTITY_CHARS} characters, without NUL"
    if update.content_hash is not None and not _text_ok(update.content_hash, CONTENT_HASH_CHARS):
        return f"content_hash must be at most {CONTENT_HASH_CHARS} characters, without NUL"
    if update.changes and update.facts is None:
        return "changes need the node's facts they lead to"
    if update.facts_own is not None and update.facts is None:
        return "facts_own says whose the facts are: it needs the facts"
    for change in update.changes:
        if not _text_ok(change.path, PATH_CHARS) or not change.path:
            return f"fact path must be 1 to {PATH_CHARS} characters, without NUL"
        if change.old is None and change.new is None:
            return f"{change.path}: a change needs an old or a new reading"
        for reading in (change.old, change.new):
            if reading is not None and not _reading_ok(reading):
                return f"{change.path}: malformed reading"
    paths, readings = _checked_paths, _checked_readings
    for path, reading in (update.facts or {}).items():
        if path not in paths:
            if not _text_ok(path, PATH_CHARS) or not path:
                return f"fact path must be 1 to {PATH_CHARS} characters, without NUL"
            _remember(paths, path, path)
        if readings.get(id(reading)) is not reading:
            if not _reading_ok(reading):
                return f"{path}: malformed reading"
            _remember(readings, id(reading), reading)
    return None


# A fleet stores the same paths and (shared, see plumb.facts.flatten) Reading objects node
# after node: each is checked once. A reading is found by its identity, and held so that its
# id is not reused while kept; Reading is frozen.
_CHECKED_MAX = 1 << 16
_checked_paths: dict[str, str] = {}
_checked_readings: dict[int, Reading] = {}


def _remember(checked: dict, key: object, value: object) -> None:
    if len(checked) >= _CHECKED_MAX:
        checked.clear()
    checked[key] = value


def _text_ok(value: object, max_chars: int) -> bool:
    # PostgreSQL refuses NUL in text and enforces lengths; SQLite does neither.
    return (
        isinstance(value, str)
        and len(value) <= max_chars
        and "\x00" not in value
        and (value.isascii() or _utf8(value))  # the former known without a scan
    )


def _utf8(text: str) -> bool:
    """Whether `text` has a UTF-8 form (no lone surrogate), as stored text and orjson need."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _reading_ok(reading: Reading) -> bool:
    return (
        isinstance(reading, Reading)
        and reading.status in _STATUSES
        and _value_ok(reading.value)
        and (reading.error is None or _text_ok(reading.error, MAX_VALUE_CHARS))
    )


def _value_ok(value: object) -> bool:
    """A value the facts document holds as it is: UTF-8 text, a finite float, or an integer of
    the wire's 64 bits (signed or not; orjson writes no wider, and reads a wider one as a
    float)."""
    if isinstance(value, int):  # bool too
        return -(1 << 63) <= value < 1 << 64
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or (isinstance(value, str) and (value.isascii() or _utf8(value)))


def _node_shape(update: NodeUpdate) -> tuple[str, ...]:
    """The node columns ``update`` sets; updates of one shape share a statement.

    A connect takes ownership of the node; a disconnect keeps the owner (the last holder);
    drift transitions alone leave the row as it is, so tailing replicas skip them.
    """
    shape = tuple(name for name in _NODE_FIELDS if getattr(update, name) is not None)
    if not shape and update.facts is None and not update.baseline:
        return ()
    return (
        shape
        + (("owner",) if update.connected else ())
        + ("changed_by", "changed_at", "removed_at")  # a write for a removed name revives it
        # Whether the facts are the agent's own goes with them (NULL, unknown, if not given).
        + (("facts_own", "facts_changed_at") if update.facts is not None else ())
        + (("baseline_changed_at", "baseline_changed_by") if update.baseline else ())
    )


def _facts_docs(facts: Mapping[str, Reading]) -> dict[str, str]:
    """A node's facts as its `node_facts` row holds them: its own readings (`own_paths`: GPU
    UUIDs and serials, hostname, boot id) in ``own``, every other in ``rest``, each
    ``{status: {path: value}}`` with the value as ``[value, error]`` for a reading with an
    error (a fact's value is never a list). Grouped by status, a node's ~370 readings load as
    plain values, not objects; apart from its own, nodes of one shape (flattened in one order)
    write the same ``rest``, which a load decodes once for all of them."""
    rest: dict[str, dict[str, object]] = {}
    for path, reading in facts.items():
        of = rest.get(reading.status)
        if of is None:
            of = rest[reading.status] = {}
        of[path] = reading.value if reading.error is None else [reading.value, reading.error]
    own: dict[str, dict[str, object]] = {}
    for path in own_paths(tuple(facts)):
        status = facts[path].status
        of = rest[status]
        own.setdefault(status, {})[path] = of.pop(path)
        if not of:
            del rest[status]
    return {"own": orjson.dumps(own).decode(), "rest": orjson.dumps(rest).decode()}


def _load_facts(conn: Connection, stmt: Select) -> dict[str, dict[str, Reading]]:
    """The facts of each node `stmt` selects (node, own, rest), read straight off the DBAPI
    cursor.

    At 10,000 nodes this is ~3.7 million readings: the rows come as plain tuples, a chunk at
    a time (never all at once). Nodes of one shape store the same ``rest`` (`_facts_docs`),
    decoded once and copied for each (up to _RESTS_MAX distinct ones at a time), and repeat
    the same paths and mostly the same readings, so each distinct one is one object, shared.
    """
    result = conn.execute(stmt)
    facts: dict[str, dict[str, Reading]] = {}
    shared: dict[str, dict[object, Reading]] = {}
    intern = {}.setdefault
    rests: dict[str, dict[str, Reading]] = {}
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        while rows := result.cursor.fetchmany(_LOAD_CHUNK):
            for node, own, rest in rows:
                base = rests.get(rest)
                if base is None:
                    base = {}
                    _decode(rest, base, shared, intern)
                    if len(rests) >= _RESTS_MAX:
                        rests.clear()
                    rests[rest] = base
                facts[node] = of_node = base.copy()
                _decode(own, of_node, shared, intern)
    except dbapi_error as exc:
        raise DBAPIError.instance(str(stmt), None, exc, dbapi_error) from exc
    finally:
        result.close()
    return facts


def _decode(
    doc: str,
    into: dict[str, Reading],
    shared: dict[str, dict[object, Reading]],
    intern: Callable[[str, str], str],
) -> None:
    """The readings of a `_facts_docs` document into `into`, each distinct one taken from (or
    added to) `shared` by status. Text and integers are their own keys (no text equals a
    number); the rest go with their type, as True and 1 are equal keys, and floats by their
    bits (0.0 and -0.0 are equal too)."""
    for status, entries in orjson.loads(doc).items():
        status = intern(status, status)
        readings = shared.setdefault(status, {})
        known = readings.get
        for path, value in entries.items():
            kind = value.__class__
            if kind is list:
                reading = Reading(status, value[0], value[1])
            else:
                if kind is str or kind is int:
                    key = value
                else:
                    key = (kind, value.hex() if kind is float else value)
                reading = known(key)
                if reading is None:
                    reading = readings[key] = Reading(status, value)
            into[intern(path, path)] = reading


def _stored(row: Any, facts: dict[str, Reading], *, connected: bool) -> StoredNode:
    return StoredNode(
        name=row.name,
        connected=connected,
        boot_id=row.boot_id,
        agent_version=row.agent_version,
        first_seen_at=row.first_seen_at,
        last_report_at=row.last_report_at,
        facts=facts,
        content_hash=row.content_hash,
        facts_own=row.facts_own,
        owner=row.owner,
        changed_by=row.changed_by,
        changed_at=row.changed_at,
        facts_changed_at=row.facts_changed_at,
        baseline_changed_at=row.baseline_changed_at,
        baseline_changed_by=row.baseline_changed_by,
        removed=row.removed_at is not None,
    )


def _change_params(update: NodeUpdate, change: Change) -> dict[str, object]:
    return {
        "node": update.node,
        "path": change.path,
        "old": _to_json(change.old),
        "new": _to_json(change.new),
        "at": update.at,
    }


def _to_json(reading: Reading | None) -> str | None:
    if reading is None:
        return None
    return orjson.dumps(reading.to_json()).decode()


def _reading(doc: str | None) -> Reading | None:
    if doc is None:
        return None
    fields = orjson.loads(doc)
    return Reading(fields["status"], fields.get("value"), fields.get("error"))
