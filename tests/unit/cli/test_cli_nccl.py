"""`plumb nccl FILE`: every run of a nccl-tests log as JSON or a table, gated by exit code.

Figures are the ones read by hand from the real logs (tests/data/real/nccl-tests/).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from plumb.aggregator.cli import app

REAL = Path(__file__).parents[2] / "data" / "real" / "nccl-tests"
runner = CliRunner()


def test_json_lists_each_run_with_its_figures_and_exit_0_when_all_are_ok(tmp_path):
    both = tmp_path / "two.log"
    both.write_text(
        (REAL / "superbench_a100x8.txt").read_text()
        + (REAL / "dranet_h200_2x1_mpi_noise.txt").read_text()
    )
    result = runner.invoke(app, ["nccl", str(both), "-o", "json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [
        (r["collective"], r["ranks"], r["busbw_gbps"], r["avg_busbw_gbps"], r["status"])
        for r in runs
    ] == [("all_reduce", 8, 235.26, 68.4048, "ok"), ("all_reduce", 2, 31.89, 15.5188, "ok")]
    assert [n["host"] for n in runs[1]["nodes"]] == [
        "nccl-test-dranet-1gpu-1nic-worker-0",
        "nccl-test-dranet-1gpu-1nic-worker-1",
    ]
    assert runs[0]["nodes"] == [
        {"host": "localhost", "gpus": 8, "devices": list(range(8)), "model": "A100-SXM4-40GB"}
    ]


def test_a_failed_or_incomplete_run_exits_1():
    for name, status in (
        ("nccl-tests-37_v100x8_allgather_oldfmt_FAILED.txt", "failed"),
        ("dranet_b200_2node_allgather_hang_truncated.txt", "incomplete"),
    ):
        result = runner.invoke(app, ["nccl", str(REAL / name), "-o", "json"])
        assert result.exit_code == 1, name
        assert [r["status"] for r in json.loads(result.stdout)] == [status]


def test_the_table_names_the_nodes_and_says_why_a_run_is_not_ok():
    result = runner.invoke(app, ["nccl", str(REAL / "dranet_b200_1x2_allgather_elided.txt")])
    assert result.exit_code == 1
    assert "all_gather" in result.stdout and "482.71" in result.stdout
    assert "nccl-gib-test-0" in result.stdout and "incomplete" in result.stdout
    assert "NCCL 2.26.6+cuda12.8" in result.stdout
    assert "no footer" in result.stdout


def test_a_file_without_a_run_or_missing_exits_2(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("Initializing SSH...\n")
    assert runner.invoke(app, ["nccl", str(empty)]).exit_code == 2
    assert runner.invoke(app, ["nccl", str(tmp_path / "absent.log")]).exit_code == 2
