"""A test that hangs fails on its own, with its stacks, and the run goes on (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from timeouts import scaled

TESTS = Path(__file__).resolve().parents[1]

HANGS = """
import time

def test_hangs():
    time.sleep(600)

def test_after_it():
    pass
"""


def test_a_hung_test_fails_at_the_scaled_limit_and_the_next_one_runs(tmp_path: Path) -> None:
    for name in ("conftest.py", "timeouts.py"):
        shutil.copy(TESTS / name, tmp_path / name)
    (tmp_path / "test_hangs.py").write_text(HANGS)
    # 120 s scaled by 0.02: the hung test is cut after 2.4 s.
    env = {**os.environ, "PLUMB_TEST_TIMEOUT_SCALE": "0.02"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),  # without the limit, the hung test would hold this run
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_hangs.py::test_hangs - Failed: Timeout" in run.stdout, run.stdout
    assert "PASSED test_hangs.py::test_after_it" in run.stdout, run.stdout
    assert "time.sleep(600)" in run.stdout + run.stderr  # the stack says where it hung
