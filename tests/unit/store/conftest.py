"""Fixtures for the store tests: a migrated SQLite file per test.

tests/integration/store/ runs these same modules against PostgreSQL by overriding `url` and
`module_url`: tests here stay dialect-neutral (SQL through SQLAlchemy, never sqlite3).
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb.aggregator.store import Store


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'plumb.db'}"


@pytest.fixture(scope="module")
def module_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty database shared by one module's tests (hypothesis examples, say)."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'plumb.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    store = Store(url)
    yield store
    store.close()
