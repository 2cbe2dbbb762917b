"""A node's stored facts in two documents: its own readings, and the rest.

Nodes of one shape differ in a few readings only (GPU UUIDs and serials, hostname, boot id),
so their `rest` documents are the same text, which a restart decodes once instead of once per
node (bench/README.md, round 60). Both documents are ``{status: {path: value}}`` as `doc`
was. `doc` goes: a replica still running older code then fails on the table, loudly, instead
of reading a node's own readings as all of its facts.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

import json
import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NODES_AT_ONCE = 200
# A node's own paths when this revision was written (plumb.facts.own_paths).
_OWN = re.compile(r"gpus\[\d+\]\.(uuid|serial)|host\.(hostname|boot_id)")

_table = sa.table(
    "node_facts",
    sa.column("node", sa.String),
    sa.column("doc", sa.Text),
    sa.column("own", sa.Text),
    sa.column("rest", sa.Text),
)


def _dumps(doc: dict) -> str:
    return json.dumps(doc, separators=(",", ":"))


def _rewrite(columns: tuple[str, ...], convert) -> None:
    """Each row's `columns` read, passed to `convert`, and its result written back."""
    conn = op.get_bind()
    names = [r[0] for r in conn.execute(sa.select(_table.c.node))]
    stmt = (
        sa.update(_table)
        .where(_table.c.node == sa.bindparam("name"))
        .values({c: sa.bindparam(f"new_{c}") for c in ("doc", "own", "rest") if c not in columns})
    )
    for i in range(0, len(names), _NODES_AT_ONCE):
        rows = conn.execute(
            sa.select(_table.c.node, *(_table.c[c] for c in columns)).where(
                _table.c.node.in_(names[i : i + _NODES_AT_ONCE])
            )
        )
        new = [(row[0], convert(*row[1:])) for row in rows]
        conn.execute(stmt, [{"name": n, **{f"new_{c}": v for c, v in d.items()}} for n, d in new])


def _split(doc: str) -> dict[str, str]:
    own: dict[str, dict] = {}
    rest: dict[str, dict] = {}
    for status, entries in json.loads(doc).items():
        for path, value in entries.items():
            (own if _OWN.fullmatch(path) else rest).setdefault(status, {})[path] = value
    return {"own": _dumps(own), "rest": _dumps(rest)}


def _join(own: str, rest: str) -> dict[str, str]:
    doc = json.loads(rest)
    for status, entries in json.loads(own).items():
        doc.setdefault(status, {}).update(entries)
    return {"doc": _dumps(doc)}


def upgrade() -> None:
    with op.batch_alter_table("node_facts") as node_facts:
        node_facts.add_column(sa.Column("own", sa.Text(), nullable=True))
        node_facts.add_column(sa.Column("rest", sa.Text(), nullable=True))
    _rewrite(("doc",), _split)
    with op.batch_alter_table("node_facts") as node_facts:
        node_facts.drop_column("doc")
        node_facts.alter_column("own", existing_type=sa.Text(), nullable=False)
        node_facts.alter_column("rest", existing_type=sa.Text(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("node_facts") as node_facts:
        node_facts.add_column(sa.Column("doc", sa.Text(), nullable=True))
    _rewrite(("own", "rest"), _join)
    with op.batch_alter_table("node_facts") as node_facts:
        node_facts.drop_column("own")
        node_facts.drop_column("rest")
        node_facts.alter_column("doc", existing_type=sa.Text(), nullable=False)
