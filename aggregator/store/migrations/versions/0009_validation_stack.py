"""Each validation result with the stack it was measured on and its node's twin group.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("validation_results") as results:
        results.add_column(sa.Column("stack_hash", sa.String(64), nullable=True))
        results.add_column(sa.Column("gpu_model", sa.Text(), nullable=True))
        results.add_column(sa.Column("gpu_count", sa.Integer(), nullable=True))
        results.add_column(sa.Column("fabric", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("validation_results") as results:
        for column in ("fabric", "gpu_count", "gpu_model", "stack_hash"):
            results.drop_column(column)
