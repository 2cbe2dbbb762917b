"""The writer lock of a SQLite file: one exclusive Store at a time (issue 16, row 9).

These open SQLite files of their own, so they test the same thing when the PostgreSQL run
repeats this module; tests/integration/test_single_writer.py does it with two `plumb serve`.
"""

import os
import socket
from pathlib import Path

import pytest

from plumb.aggregator.store import Store, StoreError


def test_a_second_exclusive_store_on_one_sqlite_file_is_refused_naming_file_and_holder(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'plumb.db'}"
    first = Store(url, exclusive=True)
    try:
        with pytest.raises(StoreError) as refused:
            Store(url, exclusive=True)
        message = str(refused.value)
        assert f"{tmp_path / 'plumb.db'} is in use by another aggregator" in message
        assert f"pid {os.getpid()} on {socket.gethostname()}" in message
        assert refused.value.retryable is False
    finally:
        first.close()
    Store(url, exclusive=True).close()  # released with the first: the next one may start


def test_readers_need_no_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plumb.db'}"
    writer = Store(url, exclusive=True)
    try:
        reader = Store(url)  # e.g. a test or a tool reading a running aggregator's history
        assert reader.load() == []
        reader.close()
    finally:
        writer.close()


def test_a_lock_left_by_a_dead_process_does_not_block(tmp_path: Path) -> None:
    # The file outlives its holder; the kernel's lock does not.
    (tmp_path / "plumb.db.lock").write_text("pid 999999 on elsewhere\n")
    store = Store(f"sqlite:///{tmp_path / 'plumb.db'}", exclusive=True)
    store.close()
    assert (
        tmp_path / "plumb.db.lock"
    ).read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"
