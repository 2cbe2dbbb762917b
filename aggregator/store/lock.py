"""The one-writer lock of a SQLite database: a second aggregator on the same file refuses to start.

Two aggregators on one SQLite file both run, each with its own live view, and interleave their
writes into history. So the aggregator holds an exclusive `flock` on `<file>.lock`, beside the
database, for as long as its Store is open, and writes its PID and host there for whoever is
refused to name. The kernel drops the lock when the process dies, even by SIGKILL, so a stale
file never blocks a restart. (PostgreSQL is shared by design: replicas, docs/replicas.md.)
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

__all__ = ["WriterLock", "WriterLockHeld"]


class WriterLockHeld(Exception):
    """Another process holds the database's writer lock."""


class WriterLock:
    """Holds the writer lock of the SQLite database at `database` until `release`."""

    def __init__(self, database: Path):
        self.path = database.with_name(database.name + ".lock")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise WriterLockHeld(
                f"{database} is in use by another aggregator ({holder}; lock {self.path}): "
                "SQLite has one writer. Stop that process, or give this one another --db"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        """Let the next aggregator take the database; the file stays (removing it would race)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
