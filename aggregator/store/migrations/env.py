"""Alembic environment: runs on the connection ``aggregator.store.migrate`` hands over.

Without one (a developer running ``alembic revision --autogenerate`` with a Config that
sets ``sqlalchemy.url``), it opens its own engine from that URL.
"""

from alembic import context
from sqlalchemy import Connection, create_engine

from plumb.aggregator.store.models import Base


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite can only ALTER by copying the table; batch mode does that for later revisions.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as own:
            _run(own)
    finally:
        engine.dispose()
