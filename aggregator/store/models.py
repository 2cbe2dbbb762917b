"""ORM tables of the store: nodes, their current facts, and every fact change.

These classes stay inside ``aggregator.store``; the rest of the aggregator sees the
frozen dataclasses of ``store.py``. Migrations spell the schema out on their own, and a
unit test checks that they and these models agree.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Column sizes; the store rejects longer input up front so SQLite and PostgreSQL agree.
NODE_NAME_CHARS = 253  # a Kubernetes node name is a DNS subdomain
PATH_CHARS = 512  # plumb.facts.MAX_PATH_CHARS
STATUS_CHARS = 16
IDENTITY_CHARS = 128  # boot id (a UUID) and agent version, with room to spare
CONTENT_HASH_CHARS = 64  # hex SHA-256


class UTCDateTime(TypeDecorator[datetime]):
    """A tz-aware timestamp stored as UTC; SQLite drops the zone, so reads put UTC back."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("timestamps must be tz-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class NodeRow(Base):
    __tablename__ = "nodes"
    __table_args__ = (Index("ix_nodes_changed_at", "changed_at"),)

    name: Mapped[str] = mapped_column(String(NODE_NAME_CHARS), primary_key=True)
    boot_id: Mapped[str | None] = mapped_column(String(IDENTITY_CHARS))
    agent_version: Mapped[str | None] = mapped_column(String(IDENTITY_CHARS))
    connected: Mapped[bool] = mapped_column(Boolean)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_report_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # plumb.facts.content_hash of the node's facts, written with them, so a restart
    # need not hash every node again; NULL in rows written before 0004.
    content_hash: Mapped[str | None] = mapped_column(String(CONTENT_HASH_CHARS))
    # 0011: whether the stored facts are the agent's own, no cluster overlay in them, so
    # `content_hash` covers them and a restart's resume need not hash them; NULL: unknown.
    facts_own: Mapped[bool | None] = mapped_column(Boolean)
    # Replicas (0005): the replica holding the node's stream, or the last one that held it;
    # the replica that last wrote the row and when (other replicas tail by `changed_at`);
    # when its facts last changed (only the stream's holder writes them), and when and by
    # which replica its baseline last changed (any replica may accept one). Separate stamps,
    # so one replica's write never hides another's change from a third.
    owner: Mapped[str | None] = mapped_column(String(IDENTITY_CHARS))
    changed_by: Mapped[str | None] = mapped_column(String(IDENTITY_CHARS))
    changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    facts_changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    baseline_changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    baseline_changed_by: Mapped[str | None] = mapped_column(String(IDENTITY_CHARS))
    # 0007: set when the node was removed but its history kept; the row anchors that history
    # and is neither loaded nor tailed. Any later write for the name clears it.
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class ReplicaRow(Base):
    """One aggregator process sharing the database, and when it last said it was alive."""

    __tablename__ = "replicas"

    name: Mapped[str] = mapped_column(String(IDENTITY_CHARS), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime)


class NodeFactsRow(Base):
    """A node's current facts as two JSON documents (store.py, ``_facts_docs``): its own
    readings, and the rest, which nodes of one shape share (0012). A node's facts are written
    and read together, so one row each, not one per fact (0010)."""

    __tablename__ = "node_facts"

    node: Mapped[str] = mapped_column(
        String(NODE_NAME_CHARS), ForeignKey("nodes.name", ondelete="CASCADE"), primary_key=True
    )
    own: Mapped[str] = mapped_column(Text)
    rest: Mapped[str] = mapped_column(Text)


class FactChangeRow(Base):
    """One transition of one fact; ``old``/``new`` hold ``Reading.to_json()`` or NULL."""

    __tablename__ = "fact_changes"
    __table_args__ = (
        Index("ix_fact_changes_node_at", "node", "at"),
        Index("ix_fact_changes_at", "at"),
    )

    # BIGINT on PostgreSQL for a long history; SQLite only autoincrements INTEGER keys.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    node: Mapped[str] = mapped_column(
        String(NODE_NAME_CHARS), ForeignKey("nodes.name", ondelete="CASCADE")
    )
    path: Mapped[str] = mapped_column(String(PATH_CHARS))
    old: Mapped[str | None] = mapped_column(Text)
    new: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class DriftFindingRow(Base):
    """One drift finding's lifetime: opened once, ``closed_at`` set when it stops holding."""

    __tablename__ = "drift_findings"
    __table_args__ = (
        Index("ix_drift_findings_node_closed", "node", "closed_at"),
        Index("ix_drift_findings_opened", "opened_at"),
        # Several replicas evaluate one node: the database keeps one open finding per key.
        Index(
            "ux_drift_findings_open",
            "node",
            "kind",
            "component",
            unique=True,
            sqlite_where=text("closed_at IS NULL"),
            postgresql_where=text("closed_at IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    node: Mapped[str] = mapped_column(
        String(NODE_NAME_CHARS), ForeignKey("nodes.name", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(String(16))
    component: Mapped[str] = mapped_column(String(PATH_CHARS))
    expected: Mapped[str] = mapped_column(Text)
    observed: Mapped[str] = mapped_column(Text)
    severity: Mapped[str] = mapped_column(String(16))
    remediation: Mapped[str] = mapped_column(Text)
    recipe_hash: Mapped[str] = mapped_column(String(64))
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class BaselineRow(Base):
    """A node's accepted stack: the baseline facts as JSON and its GPU count."""

    __tablename__ = "baselines"

    node: Mapped[str] = mapped_column(
        String(NODE_NAME_CHARS), ForeignKey("nodes.name", ondelete="CASCADE"), primary_key=True
    )
    facts: Mapped[str] = mapped_column(Text)
    gpu_count: Mapped[int] = mapped_column(Integer)
    accepted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ValidationRunRow(Base):
    """One validation run: what was asked and, once finished, its result and summary."""

    __tablename__ = "validation_runs"
    __table_args__ = (Index("ix_validation_runs_created", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    result: Mapped[str | None] = mapped_column(String(STATUS_CHARS))
    deadline_s: Mapped[float] = mapped_column(Float)
    # JSON: phases, planned checks [{id, phase, severity, runs_on}], node names.
    phases: Mapped[str] = mapped_column(Text)
    checks: Mapped[str] = mapped_column(Text)
    nodes: Mapped[str] = mapped_column(Text)
    # The replica running it: on start-up, an unfinished run of this replica's name, or of one
    # no longer alive, was cut short and is finished as an error.
    replica: Mapped[str | None] = mapped_column(String(IDENTITY_CHARS))


class ValidationResultRow(Base):
    """One check's result on one node in one run; ``details`` is JSON text."""

    __tablename__ = "validation_results"
    __table_args__ = (Index("ix_validation_results_node", "node", "check_id"),)

    run_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("validation_runs.id", ondelete="CASCADE"), primary_key=True
    )
    # No foreign key to nodes: results outlive a node removed from the store.
    node: Mapped[str] = mapped_column(String(NODE_NAME_CHARS), primary_key=True)
    check_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    phase: Mapped[str] = mapped_column(String(16))
    severity: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(STATUS_CHARS))
    message: Mapped[str] = mapped_column(Text)
    value: Mapped[float | None] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(32))
    threshold: Mapped[float | None] = mapped_column(Float)
    peak: Mapped[float | None] = mapped_column(Float)
    ratio_to_peak: Mapped[float | None] = mapped_column(Float)
    duration_s: Mapped[float] = mapped_column(Float)
    details: Mapped[str] = mapped_column(Text)
    remediation: Mapped[str] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # 0009: the stack it was measured on (validation/stack.py) and the node's twin group;
    # NULL for cluster checks, multi-node runs and rows written before 0009.
    stack_hash: Mapped[str | None] = mapped_column(String(CONTENT_HASH_CHARS))
    gpu_model: Mapped[str | None] = mapped_column(Text)
    gpu_count: Mapped[int | None] = mapped_column(Integer)
    fabric: Mapped[str | None] = mapped_column(String(32))
