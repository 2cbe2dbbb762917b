"""Index history by time alone, for retention's "older than" deletes.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_fact_changes_at", "fact_changes", ["at"])


def downgrade() -> None:
    op.drop_index("ix_fact_changes_at", table_name="fact_changes")
