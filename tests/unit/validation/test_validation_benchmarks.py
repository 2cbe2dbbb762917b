"""External nccl-tests runs attached to nodes: matched by host, graded like the built-in
NCCL check, stored as finished validation runs.

Figures are the ones read by hand from the real logs (tests/data/real/nccl-tests/); peaks
from recipes/knowledge/gpus.yaml (A100 SXM4: NVLink 600 GB/s; the nccl-allreduce check
grades busbw against 0.7 x half of it, i.e. 210 GB/s of a 300 GB/s peak).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from plumb.aggregator.errors import InvalidInput, NotFound
from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.validation.benchmarks import external_runs, recorded
from plumb.facts import Reading
from plumb.nccltests import parse

REAL = Path(__file__).parents[2] / "data" / "real" / "nccl-tests"
CATALOG = load_catalog()
NOW = datetime(2026, 7, 1, tzinfo=UTC)


def _state(**nodes: str) -> LiveState:
    """Nodes by name, each reporting the host name given (and an H100, to show the log wins)."""
    state = LiveState()
    for name, hostname in nodes.items():
        node = state.node(name, NOW)
        node.facts = {
            "host.hostname": Reading.ok(hostname),
            "gpus[0].name": Reading.ok("NVIDIA H100 80GB HBM3"),
        }
    return state


def _log(name: str) -> str:
    return (REAL / name).read_text()


def test_a_single_node_run_is_graded_against_the_gpu_model_the_log_names():
    state = _state(**{"gpu-a100-1": "gpu-a100-1"})
    (run,) = external_runs(
        parse(_log("superbench_a100x8.txt")), state, CATALOG, NOW, ("gpu-a100-1",)
    )
    (result,) = run.results.values()
    assert (result.node, result.check_id, result.status) == ("gpu-a100-1", "nccl-allreduce", "pass")
    assert result.value == 235.26 and result.unit == "GB/s"
    assert result.peak == 300 and result.threshold == 210
    assert result.ratio_to_peak == pytest.approx(235.26 / 300)
    assert result.details["collective"] == "all_reduce" and result.details["hosts"] == "localhost"
    assert run.finished_at == NOW and run.result == "passed"
    assert recorded([run]) == [run]


def test_a_single_node_run_below_the_threshold_fails():
    slow = _log("superbench_a100x8.txt").replace("134.44  235.26", "134.44  150.00")
    state = _state(**{"gpu-a100-1": "gpu-a100-1"})
    (run,) = external_runs(parse(slow), state, CATALOG, NOW, ("gpu-a100-1",))
    (result,) = run.results.values()
    assert result.status == "fail" and result.ratio_to_peak == pytest.approx(0.5)
    assert run.result == "failed"


def test_a_multi_node_run_lands_on_each_host_by_host_name_and_is_not_graded_on_nvlink():
    state = _state(
        **{
            "node-a": "nccl-test-dranet-1gpu-1nic-worker-0",
            "node-b": "nccl-test-dranet-1gpu-1nic-worker-1.cluster.local",
            "node-c": "other",
        }
    )
    (run,) = external_runs(parse(_log("dranet_h200_2x1_mpi_noise.txt")), state, CATALOG, NOW)
    assert run.nodes == ("node-a", "node-b")
    for result in run.results.values():
        assert result.status == "pass" and result.value == 31.89
        assert result.peak is None and "not graded" in result.message


def test_failed_and_incomplete_runs_are_never_a_pass():
    state = _state(**{"v100-1": "v100-1", "nccl-gib-test-0": "x", "nccl-gib-test-1": "y"})
    log = _log("nccl-tests-37_v100x8_allgather_oldfmt_FAILED.txt")
    (failed,) = external_runs(parse(log), state, CATALOG, NOW, ("v100-1",))
    assert [(r.check_id, r.status) for r in failed.results.values()] == [("nccl-allgather", "fail")]
    hung = _log("dranet_b200_2node_allgather_hang_truncated.txt")
    (run,) = external_runs(parse(hung), state, CATALOG, NOW)
    assert {r.node: r.status for r in run.results.values()} == {
        "nccl-gib-test-0": "error",
        "nccl-gib-test-1": "error",
    }


def test_each_run_of_a_log_is_its_own_validation_run():
    both = _log("superbench_a100x8.txt") + _log("nccl-tests-37_v100x8_allgather_oldfmt_FAILED.txt")
    runs = external_runs(parse(both), _state(n1="n1"), CATALOG, NOW, ("n1",))
    assert [r.result for r in runs] == ["passed", "failed"]


def test_unknown_hosts_unknown_nodes_and_logs_without_runs_are_refused():
    state = _state(n1="n1")
    with pytest.raises(InvalidInput, match="does not know: nvidiatools-29-workload"):
        external_runs(parse(_log("schmaustech_l40s_2x2.txt")), state, CATALOG, NOW)
    with pytest.raises(InvalidInput, match="names no hosts"):
        external_runs(parse(_log("awsome_p5_2x8_srun_prefix.txt")), state, CATALOG, NOW)
    with pytest.raises(NotFound):
        external_runs(parse(_log("superbench_a100x8.txt")), state, CATALOG, NOW, ("n9",))
    with pytest.raises(InvalidInput, match="no nccl-tests run"):
        external_runs(parse("hello\n"), state, CATALOG, NOW)
