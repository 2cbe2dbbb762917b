"""Validation runs and their per-node, per-check results.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "validation_runs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.String(16), nullable=True),
        sa.Column("deadline_s", sa.Float(), nullable=False),
        sa.Column("phases", sa.Text(), nullable=False),
        sa.Column("checks", sa.Text(), nullable=False),
        sa.Column("nodes", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_validation_runs"),
    )
    op.create_index("ix_validation_runs_created", "validation_runs", ["created_at"])
    op.create_table(
        "validation_results",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("check_id", sa.String(64), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("peak", sa.Float(), nullable=True),
        sa.Column("ratio_to_peak", sa.Float(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("remediation", sa.Text(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["validation_runs.id"],
            name="fk_validation_results_run_id_validation_runs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "node", "check_id", name="pk_validation_results"),
    )
    op.create_index("ix_validation_results_node", "validation_results", ["node", "check_id"])


def downgrade() -> None:
    op.drop_index("ix_validation_results_node", table_name="validation_results")
    op.drop_table("validation_results")
    op.drop_index("ix_validation_runs_created", table_name="validation_runs")
    op.drop_table("validation_runs")
