"""Two `plumb serve` on one SQLite file: the second refuses to start (issue 16, row 9).

Before, both ran, each with its own live view, and their writes interleaved in history.
"""

from __future__ import annotations

import subprocess

from conftest import BIN, ENV, Aggregator
from ports import free_port


def _second_serve(db: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(BIN / "plumb"),
            "serve",
            "--grpc-listen",
            f"127.0.0.1:{free_port()}",
            "--http-listen",
            f"127.0.0.1:{free_port()}",
            "--db",
            db,
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )


def test_a_second_aggregator_on_the_same_sqlite_file_refuses_to_start(aggregator: Aggregator):
    result = _second_serve(aggregator.db)
    assert result.returncode == 5  # unavailable (aggregator/errors.py STATUS)
    said = "".join(result.stderr.split())  # the terminal wraps long paths anywhere
    db_file = aggregator.workdir / "plumb.db"
    assert f"{db_file}isinusebyanotheraggregator(pid{aggregator.proc.pid}on" in said
    assert "Stopthatprocess,orgivethisoneanother--db" in said
    assert aggregator.get("/readyz").status_code == 200  # the first one is untouched


def test_the_file_is_free_again_once_the_first_has_stopped(tmp_path):
    first = Aggregator(tmp_path).start()
    first.stop()
    second = Aggregator(tmp_path, http_port=free_port()).start()
    assert second.get("/readyz").status_code == 200
    second.stop()
