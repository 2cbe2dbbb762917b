"""Every store test module of tests/unit/store, collected again here to run on PostgreSQL.

Each module is loaded under a name of its own and its tests and fixtures are re-exported, so
pytest collects them in this directory, where `url` is a PostgreSQL database. Tests that only
make sense on SQLite skip themselves by dialect.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sqlalchemy import text

from plumb.aggregator.store import Store, StoreError

UNIT = Path(__file__).resolve().parents[2] / "unit" / "store"


def _load(stem: str) -> dict[str, object]:
    """The public names of the unit module ``stem``, as a star import would give them."""
    spec = importlib.util.spec_from_file_location(f"pg_{stem}", UNIT / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}


for _stem in sorted(p.stem for p in UNIT.glob("test_*.py")):
    _names = _load(_stem)
    _clash = {k for k in _names if k.startswith("test_") and k in globals()}
    assert not _clash, f"{_stem} repeats test names {_clash}: rename one"
    globals().update(_names)


def test_the_url_under_test_is_postgresql(store: Store) -> None:
    assert store._engine.dialect.name == "postgresql"
    with store._engine.connect() as conn:
        assert conn.execute(text("SELECT version()")).scalar().startswith("PostgreSQL")


def test_a_refused_connection_raises_a_retryable_store_error(pg_server) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    try:
        Store(f"postgresql+psycopg://postgres@127.0.0.1:{closed}/plumb?connect_timeout=2")
    except StoreError as exc:
        assert exc.retryable
        assert "127.0.0.1" in str(exc)
    else:
        raise AssertionError("connecting to a closed port succeeded")
