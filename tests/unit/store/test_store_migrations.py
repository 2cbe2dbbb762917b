"""Schema migrations: programmatic Alembic upgrade, idempotence, models in step."""

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

import plumb.aggregator.store.store as store_module
from plumb.aggregator.store import Store, StoreError, migrate
from plumb.aggregator.store.models import Base

HEAD = ScriptDirectory(str(Path(store_module.__file__).with_name("migrations"))).get_current_head()


def _sql(url: str, statement: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement))
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _version(url: str) -> list[str]:
    return [r[0] for r in _sql(url, "SELECT version_num FROM alembic_version")]


def test_migrate_on_an_empty_database_creates_the_tables_at_head(url):
    migrate(url)
    assert {
        "nodes",
        "facts",
        "fact_changes",
        "drift_findings",
        "baselines",
        "alembic_version",
    } <= _tables(url)
    assert _version(url) == [HEAD]


def test_migrating_twice_is_a_no_op(url):
    migrate(url)
    migrate(url)
    Store(url).close()
    assert _version(url) == [HEAD]


def test_migrations_match_the_models(url):
    migrate(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    finally:
        engine.dispose()


def test_sqlite_connections_enforce_foreign_keys_and_use_wal(store):
    if store._engine.dialect.name != "sqlite":
        pytest.skip("SQLite pragmas")
    with store._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


@pytest.mark.parametrize(
    "bad_url",
    ["not a url", "mysql://db/plumb", "sqlite://", "sqlite:///:memory:"],
)
def test_unusable_urls_raise_a_store_error_that_is_not_retryable(bad_url):
    with pytest.raises(StoreError) as info:
        Store(bad_url)
    assert not info.value.retryable


def test_a_database_from_a_newer_plumb_is_refused(url):
    migrate(url)
    _sql(url, "UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer Plumb"):
        migrate(url)


def test_an_unreachable_database_raises_a_retryable_store_error(tmp_path):
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{tmp_path / 'missing-dir' / 'plumb.db'}")
    assert info.value.retryable
    assert "missing-dir" in str(info.value)
