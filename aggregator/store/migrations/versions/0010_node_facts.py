"""Each node's current facts as one JSON document, in place of a row per fact.

A node's facts are written and read together: a row per fact made a node's first sync ~370
inserts and a restart of 10,000 nodes ~3.7 million rows read (bench/README.md, round 34).
The document is ``{status: {path: value}}``, with ``[value, error]`` for a reading with an
error; ``value`` as the old column held it, JSON.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NODES_AT_ONCE = 200


def upgrade() -> None:
    node_facts = op.create_table(
        "node_facts",
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("doc", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node"], ["nodes.name"], name="fk_node_facts_node_nodes", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("node", name="pk_node_facts"),
    )
    conn = op.get_bind()
    facts = sa.table(
        "facts",
        sa.column("node", sa.String),
        sa.column("path", sa.String),
        sa.column("status", sa.String),
        sa.column("value", sa.Text),
        sa.column("error", sa.Text),
    )
    names = [r[0] for r in conn.execute(sa.select(facts.c.node).distinct())]
    for i in range(0, len(names), _NODES_AT_ONCE):
        docs: dict[str, dict[str, dict[str, object]]] = {}
        rows = conn.execute(
            sa.select(facts.c.node, facts.c.path, facts.c.status, facts.c.value, facts.c.error)
            .where(facts.c.node.in_(names[i : i + _NODES_AT_ONCE]))
            .order_by(facts.c.node, facts.c.path)
        )
        for node, path, status, value, error in rows:
            value = None if value is None else json.loads(value)
            entries = docs.setdefault(node, {}).setdefault(status, {})
            entries[path] = value if error is None else [value, error]
        conn.execute(
            node_facts.insert(),
            [{"node": n, "doc": json.dumps(d, separators=(",", ":"))} for n, d in docs.items()],
        )
    op.drop_table("facts")


def downgrade() -> None:
    facts = op.create_table(
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
    conn = op.get_bind()
    node_facts = sa.table("node_facts", sa.column("node", sa.String), sa.column("doc", sa.Text))
    for node, doc in conn.execute(sa.select(node_facts.c.node, node_facts.c.doc)).all():
        rows = []
        for status, entries in json.loads(doc).items():
            for path, entry in entries.items():
                value, error = entry if isinstance(entry, list) else (entry, None)
                value = None if value is None else json.dumps(value)
                rows.append(
                    {"node": node, "path": path, "status": status, "value": value, "error": error}
                )
        if rows:
            conn.execute(facts.insert(), rows)
    op.drop_table("node_facts")
