"""Schema migrations: programmatic Alembic upgrade, idempotence, models in step."""

import json
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

import plumb.aggregator.store.store as store_module
from plumb.aggregator.store import Store, StoreError, migrate
from plumb.aggregator.store.models import Base
from plumb.facts import Reading

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
        "node_facts",
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


def _alembic(url: str) -> Config:
    config = Config()
    config.set_main_option(
        "script_location", str(Path(store_module.__file__).with_name("migrations"))
    )
    config.set_main_option("sqlalchemy.url", url)
    return config


# Rows as 0001-0009 wrote them: `value` the reading's value as JSON text.
_ROWS_0009 = [
    ("a", "driver.driver_version", "ok", '"570.86.15"', None),
    ("a", "gpus[0].persistence_mode", "ok", "true", None),
    ("a", "gpus[0].power_limit_watts", "ok", "700", None),
    ("a", "gpus[0].temperature_slowdown_celsius", "ok", "-0.0", None),
    ("a", "fabric.fabric_manager_version", "not_supported", None, None),
    ("a", "cuda.cuda_runtime_version", "error", None, "libcudart.so: cannot open"),
    ("b", "driver.driver_version", "ok", '"550.54.15"', None),
]


def test_0010_moves_each_nodes_fact_rows_into_one_document_and_back(url):
    config = _alembic(url)
    command.upgrade(config, "0009")
    for node in ("a", "b", "no-facts"):
        _sql(
            url,
            "INSERT INTO nodes (name, connected, first_seen_at)"
            f" VALUES ('{node}', false, '2026-01-01 00:00:00')",
        )
    for row in _ROWS_0009:
        values = ", ".join("NULL" if v is None else "'" + v + "'" for v in row)
        _sql(url, f"INSERT INTO facts (node, path, status, value, error) VALUES ({values})")
    migrate(url)
    assert "facts" not in _tables(url)
    store = Store(url)
    try:
        facts = {n.name: n.facts for n in store.load()}
    finally:
        store.close()
    assert facts == {
        "a": {
            "driver.driver_version": Reading.ok("570.86.15"),
            "gpus[0].persistence_mode": Reading.ok(True),
            "gpus[0].power_limit_watts": Reading.ok(700),
            "gpus[0].temperature_slowdown_celsius": Reading.ok(-0.0),
            "fabric.fabric_manager_version": Reading.not_supported(),
            "cuda.cuda_runtime_version": Reading("error", None, "libcudart.so: cannot open"),
        },
        "b": {"driver.driver_version": Reading.ok("550.54.15")},
        "no-facts": {},
    }
    assert type(facts["a"]["gpus[0].persistence_mode"].value) is bool
    assert str(facts["a"]["gpus[0].temperature_slowdown_celsius"].value) == "-0.0"
    command.downgrade(config, "0009")
    back = _sql(url, "SELECT node, path, status, value, error FROM facts ORDER BY node, path")
    assert sorted(back) == sorted(_ROWS_0009)


# A document as 0010-0011 wrote it: a node's every reading, its own (GPU UUID and serial,
# hostname, boot id) among the rest.
_DOC_0011 = (
    '{"ok":{"host.hostname":"gpu-a","driver.driver_version":"570.86.15",'
    '"gpus[0].uuid":"GPU-6b1d","gpus[0].name":"NVIDIA H100 80GB HBM3","gpus[1].serial":"1654"},'
    '"error":{"host.boot_id":[null,"unreadable"],"cuda.cuda_runtime_version":[null,"no lib"]}}'
)


def test_0012_splits_each_document_into_the_nodes_own_readings_and_the_rest_and_back(url):
    config = _alembic(url)
    command.upgrade(config, "0011")
    _sql(
        url,
        "INSERT INTO nodes (name, connected, first_seen_at)"
        " VALUES ('a', false, '2026-01-01 00:00:00')",
    )
    _sql(url, f"INSERT INTO node_facts (node, doc) VALUES ('a', '{_DOC_0011}')")
    migrate(url)
    [(own, rest)] = _sql(url, "SELECT own, rest FROM node_facts")
    assert json.loads(own) == {
        "ok": {"host.hostname": "gpu-a", "gpus[0].uuid": "GPU-6b1d", "gpus[1].serial": "1654"},
        "error": {"host.boot_id": [None, "unreadable"]},
    }
    assert json.loads(rest) == {
        "ok": {"driver.driver_version": "570.86.15", "gpus[0].name": "NVIDIA H100 80GB HBM3"},
        "error": {"cuda.cuda_runtime_version": [None, "no lib"]},
    }
    store = Store(url)
    try:
        [node] = store.load()
    finally:
        store.close()
    assert node.facts == {
        "host.hostname": Reading.ok("gpu-a"),
        "driver.driver_version": Reading.ok("570.86.15"),
        "gpus[0].uuid": Reading.ok("GPU-6b1d"),
        "gpus[0].name": Reading.ok("NVIDIA H100 80GB HBM3"),
        "gpus[1].serial": Reading.ok("1654"),
        "host.boot_id": Reading("error", None, "unreadable"),
        "cuda.cuda_runtime_version": Reading("error", None, "no lib"),
    }
    command.downgrade(config, "0011")
    [(doc,)] = _sql(url, "SELECT doc FROM node_facts")
    assert json.loads(doc) == json.loads(_DOC_0011)
