"""The store tests of tests/unit/store, re-run against a real PostgreSQL server.

`url` and `module_url` name a fresh database on the session's server (tests/pg_fixture.py);
the unit conftest's `store` fixture is repeated here since conftests do not share fixtures
across sibling directories.
"""

from collections.abc import Iterator

import pytest
from pg_fixture import PostgresServer

from plumb.aggregator.store import Store


@pytest.fixture
def url(pg_url: str) -> str:
    return pg_url


@pytest.fixture(scope="module")
def module_url(pg_server: PostgresServer) -> str:
    return pg_server.create_database("module")


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    store = Store(url)
    yield store
    store.close()
