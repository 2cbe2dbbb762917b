"""Whether a node's stored facts are its agent's own, unchanged by the cluster's overlay.

Then its stored content hash covers them, and after a restart the agent's Hello naming that
hash resumes without hashing the facts again (bench/README.md, round 39). NULL, in rows
from before and wherever it is unknown, means: check by hashing.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as nodes:
        nodes.add_column(sa.Column("facts_own", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as nodes:
        nodes.drop_column("facts_own")
