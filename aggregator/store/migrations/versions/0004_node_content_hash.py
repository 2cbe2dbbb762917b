"""The content hash of each node's facts on its node row, so a restart need not hash them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Rows from before stay NULL: the aggregator hashes those nodes' facts when it loads them.
    # A plain ADD COLUMN: a batch copy of `nodes` would cascade-delete the facts rows.
    op.add_column("nodes", sa.Column("content_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("nodes", "content_hash")
