"""Drift findings with their lifetimes, and each node's accepted baseline.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "drift_findings",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("component", sa.String(512), nullable=False),
        sa.Column("expected", sa.Text(), nullable=False),
        sa.Column("observed", sa.Text(), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("remediation", sa.Text(), nullable=False),
        sa.Column("recipe_hash", sa.String(64), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["node"], ["nodes.name"], name="fk_drift_findings_node_nodes", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_drift_findings"),
    )
    op.create_index("ix_drift_findings_node_closed", "drift_findings", ["node", "closed_at"])
    op.create_index("ix_drift_findings_opened", "drift_findings", ["opened_at"])
    op.create_table(
        "baselines",
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("facts", sa.Text(), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["node"], ["nodes.name"], name="fk_baselines_node_nodes", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("node", name="pk_baselines"),
    )


def downgrade() -> None:
    op.drop_table("baselines")
    op.drop_index("ix_drift_findings_opened", table_name="drift_findings")
    op.drop_index("ix_drift_findings_node_closed", table_name="drift_findings")
    op.drop_table("drift_findings")
