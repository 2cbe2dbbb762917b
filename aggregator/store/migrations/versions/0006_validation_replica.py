"""Which replica runs each validation: a restart finishes the runs it cut short.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("validation_runs") as runs:
        runs.add_column(sa.Column("replica", sa.String(128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("validation_runs") as runs:
        runs.drop_column("replica")
