"""`plumb-agent` as a user runs it: one-shot facts, and clear refusals."""

from __future__ import annotations

import json
import subprocess

from conftest import BIN, ENV


def run_agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "plumb-agent"), *args], capture_output=True, text=True, env=ENV, timeout=60
    )


def test_once_prints_the_simulated_nodes_facts_as_json():
    result = run_agent("--simulate", "dgx-h100", "--node-name", "snap-1", "--once")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["node_name"] == "snap-1"
    assert len(body["facts"]["gpus"]) == 8
    assert body["facts"]["driver"]["driver_version"]["status"] == "ok"
    assert body["facts"]["host"]["hostname"]["value"] == "snap-1"


def test_an_unknown_profile_exits_with_the_shipped_names():
    result = run_agent("--simulate", "no-such-gpu", "--once")
    assert result.returncode == 2
    assert "no-such-gpu" in result.stderr
    assert "dgx-h100" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_invalid_profile_exits_naming_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ngpus:\n  count: -1\n")
    result = run_agent("--simulate", str(bad), "--aggregator", "127.0.0.1:1")
    assert result.returncode == 2
    assert str(bad) in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreadable_profile_exits_with_a_clear_message(tmp_path):
    result = run_agent("--simulate", str(tmp_path / "missing.yaml"), "--once")
    assert result.returncode == 2
    assert "missing.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_poll_interval_below_the_floor_is_refused():
    result = run_agent("--simulate", "l4", "--poll-interval", "0.01", "--once")
    assert result.returncode == 2
    assert "poll_interval_s" in result.stderr
