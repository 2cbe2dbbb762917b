"""A throwaway PostgreSQL server on loopback: initdb + pg_ctl in a temp dir, stopped by pg_ctl.

As root the server runs as the `postgres` user (PostgreSQL refuses to run as root). Fixtures:
`pg_server` (one per test session), `pg_url` (a fresh, empty database on it per test). A test
that needs to stop and start its own server (a database outage) makes a `PostgresServer`.

Without PostgreSQL's binaries the tests that need it are skipped, except under CI (CI=true),
where they fail: `.ci/run` installs the `postgresql` package.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ports import free_port

__all__ = ["PostgresServer", "pg_bin", "pg_server", "pg_url"]

_FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


class PostgresServer:
    """One PostgreSQL cluster in its own temp dir, listening on 127.0.0.1 only."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        # Not under pytest's tmp dirs: those are private to root, and the server runs as postgres.
        self.dir = Path(tempfile.mkdtemp(prefix="plumb-pg-"))
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._names = itertools.count()
        self._initialised = False

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        cmd = [str(self.bindir / tool), *args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stdout}{done.stderr}")

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def start(self) -> PostgresServer:
        """initdb on first use, then start; returns when the server accepts connections."""
        if not self._initialised:
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                "--no-sync",
            )  # fmt: skip
            self._initialised = True
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} {_FAST}"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "-o", opts,
            "start",
        )  # fmt: skip
        return self

    def stop(self) -> None:
        """Stops the server (fast shutdown: open connections are closed); keeps the data."""
        if self.data.joinpath("postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "plumb") -> str:
        """A new empty database; its SQLAlchemy URL."""
        import psycopg

        name = f"{prefix}_{next(self._names)}"
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        path = self.dir / "server.log"
        return path.read_text() if path.exists() else ""


def new_server() -> PostgresServer:
    """A started server, or the test skipped (failed under CI) when PostgreSQL is missing."""
    bindir = pg_bin()
    if bindir is None:
        message = "PostgreSQL is not installed (apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer(bindir)
    try:
        return server.start()
    except BaseException:
        server.remove()
        raise


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    server = new_server()
    yield server
    server.remove()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A fresh, empty database on the session's PostgreSQL."""
    return pg_server.create_database()
