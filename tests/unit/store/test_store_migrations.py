"""Schema migrations: programmatic Alembic upgrade, idempotence, models in step."""

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

import aggregator.store.store as store_module
from aggregator.store import Store, StoreError, migrate
from aggregator.store.models import Base

HEAD = ScriptDirectory(str(Path(store_module.__file__).with_name("migrations"))).get_current_head()


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _version(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT version_num FROM alembic_version")]


def test_migrate_on_an_empty_database_creates_the_tables_at_head(tmp_path, url):
    migrate(url)
    path = tmp_path / "plumb.db"
    assert {
        "nodes",
        "facts",
        "fact_changes",
        "drift_findings",
        "baselines",
        "alembic_version",
    } <= _tables(path)
    assert _version(path) == [HEAD] == ["0002"]


def test_migrating_twice_is_a_no_op(tmp_path, url):
    migrate(url)
    migrate(url)
    Store(url).close()
    assert _version(tmp_path / "plumb.db") == [HEAD]


def test_migrations_match_the_models(url):
    migrate(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    finally:
        engine.dispose()


def test_sqlite_connections_enforce_foreign_keys_and_use_wal(store):
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


def test_a_database_from_a_newer_plumb_is_refused(tmp_path, url):
    migrate(url)
    with sqlite3.connect(tmp_path / "plumb.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer Plumb"):
        migrate(url)


def test_an_unreachable_database_raises_a_retryable_store_error(tmp_path):
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{tmp_path / 'missing-dir' / 'plumb.db'}")
    assert info.value.retryable
    assert "missing-dir" in str(info.value)
