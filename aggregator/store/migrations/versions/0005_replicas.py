"""Several replicas on one database: who holds each node's stream, what changed when, and
at most one open drift finding per node, kind and component.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = sa.text("closed_at IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("nodes") as nodes:
        nodes.add_column(sa.Column("owner", sa.String(128), nullable=True))
        nodes.add_column(sa.Column("changed_by", sa.String(128), nullable=True))
        nodes.add_column(sa.Column("changed_at", sa.DateTime(timezone=True), nullable=True))
        nodes.add_column(sa.Column("facts_changed_at", sa.DateTime(timezone=True), nullable=True))
        nodes.add_column(
            sa.Column("baseline_changed_at", sa.DateTime(timezone=True), nullable=True)
        )
        nodes.add_column(sa.Column("baseline_changed_by", sa.String(128), nullable=True))
    op.create_index("ix_nodes_changed_at", "nodes", ["changed_at"])
    op.create_table(
        "replicas",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_replicas"),
    )
    # One replica never opened a finding twice, but close any duplicate (keeping the newest)
    # so the unique index below can be built on any database.
    op.execute(
        "UPDATE drift_findings SET closed_at = opened_at WHERE closed_at IS NULL AND EXISTS ("
        " SELECT 1 FROM drift_findings d WHERE d.closed_at IS NULL"
        " AND d.node = drift_findings.node AND d.kind = drift_findings.kind"
        " AND d.component = drift_findings.component AND (d.opened_at > drift_findings.opened_at"
        " OR (d.opened_at = drift_findings.opened_at AND d.id > drift_findings.id)))"
    )
    op.create_index(
        "ux_drift_findings_open",
        "drift_findings",
        ["node", "kind", "component"],
        unique=True,
        sqlite_where=_OPEN,
        postgresql_where=_OPEN,
    )


def downgrade() -> None:
    op.drop_index("ux_drift_findings_open", table_name="drift_findings")
    op.drop_table("replicas")
    op.drop_index("ix_nodes_changed_at", table_name="nodes")
    with op.batch_alter_table("nodes") as nodes:
        for column in (
            "baseline_changed_by",
            "baseline_changed_at",
            "facts_changed_at",
            "changed_at",
            "changed_by",
            "owner",
        ):
            nodes.drop_column(column)
