"""Fixtures for the store tests: a migrated SQLite file per test."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from aggregator.store import Store


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'plumb.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    store = Store(url)
    yield store
    store.close()
