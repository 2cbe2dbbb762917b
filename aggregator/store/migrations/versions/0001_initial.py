"""Nodes, their current facts, and the fact change history.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("boot_id", sa.String(128), nullable=True),
        sa.Column("agent_version", sa.String(128), nullable=True),
        sa.Column("connected", sa.Boolean(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_report_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_nodes"),
    )
    op.create_table(
        "facts",
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["node"], ["nodes.name"], name="fk_facts_node_nodes", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("node", "path", name="pk_facts"),
    )
    op.create_table(
        "fact_changes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("old", sa.Text(), nullable=True),
        sa.Column("new", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["node"], ["nodes.name"], name="fk_fact_changes_node_nodes", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_fact_changes"),
    )
    op.create_index("ix_fact_changes_node_at", "fact_changes", ["node", "at"])


def downgrade() -> None:
    op.drop_index("ix_fact_changes_node_at", table_name="fact_changes")
    op.drop_table("fact_changes")
    op.drop_table("facts")
    op.drop_table("nodes")
