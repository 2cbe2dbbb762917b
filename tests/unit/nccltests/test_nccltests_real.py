"""Every real nccl-tests log in tests/data/real/nccl-tests/ parses to its true figures.

Expected values were written by hand from reading each log (README.md there gives where each
came from): the collective, the ranks, each host with its GPUs, the out-of-place busbw of the
largest size, the footer's average and whether the run is whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb.nccltests import NcclRun, parse

REAL = Path(__file__).parents[2] / "data" / "real" / "nccl-tests"


def _one(name: str) -> NcclRun:
    (run,) = parse((REAL / name).read_text())
    return run


def _hosts(run: NcclRun) -> list[tuple[str, int, str | None]]:
    return [(n.host, n.gpus, n.model) for n in run.nodes]


def test_every_real_log_is_covered_here():
    tested = {
        "superbench_a100x8.txt",
        "awsome_p5_2x8_srun_prefix.txt",
        "dranet_h200_2x1_mpi_noise.txt",
        "dranet_b200_2node_allgather_hang_truncated.txt",
        "dranet_b200_1x2_allgather_elided.txt",
        "schmaustech_l40s_2x2.txt",
        "nccl-tests-37_v100x8_allgather_oldfmt_FAILED.txt",
    }
    assert {p.name for p in REAL.glob("*.txt")} == tested


def test_superbench_older_table_with_validation_off_is_a_whole_run():
    run = _one("superbench_a100x8.txt")
    # No name in the log: sum with root -1 and size = count x 4 bytes is all_reduce.
    assert run.collective == "all_reduce"
    assert run.ranks == 8
    assert _hosts(run) == [("localhost", 8, "A100-SXM4-40GB")]
    assert run.busbw_gbps == 235.26 and run.largest.size_bytes == 8589934592
    assert run.avg_busbw_gbps == 68.4048
    assert run.status == "ok" and run.validation is False
    assert len(run.rows) == 34  # 0, 0, then 4 B .. 8 GiB
    assert all(r.wrong is None for r in run.rows)  # N/A: nothing was checked


def test_srun_prefixed_rows_are_read_and_a_missing_footer_is_incomplete():
    run = _one("awsome_p5_2x8_srun_prefix.txt")
    assert run.collective == "all_reduce"
    assert run.ranks is None and run.nodes == ()  # the excerpt has no preamble
    assert len(run.rows) == 32  # 8 B .. 16 GiB
    assert run.busbw_gbps == 487.09 and run.largest.size_bytes == 17179869184
    assert run.largest.busbw_in_gbps == 487.26
    assert run.avg_busbw_gbps is None
    assert run.status == "incomplete"


def test_open_mpi_warning_blocks_between_lines_are_skipped():
    run = _one("dranet_h200_2x1_mpi_noise.txt")
    assert run.collective == "all_reduce"
    assert run.ranks == 2
    assert _hosts(run) == [
        ("nccl-test-dranet-1gpu-1nic-worker-0", 1, "NVIDIA H200"),
        ("nccl-test-dranet-1gpu-1nic-worker-1", 1, "NVIDIA H200"),
    ]
    assert len(run.rows) == 24  # 1 KiB .. 8 GiB
    assert run.busbw_gbps == 31.89 and run.avg_busbw_gbps == 15.5188
    assert run.out_of_bounds == 0 and run.status == "ok"


def test_a_run_that_hangs_after_its_header_is_incomplete_with_its_nodes():
    run = _one("dranet_b200_2node_allgather_hang_truncated.txt")
    assert run.collective == "all_gather"
    assert run.ranks == 4
    assert _hosts(run) == [
        ("nccl-gib-test-0", 2, "NVIDIA B200"),
        ("nccl-gib-test-1", 2, "NVIDIA B200"),
    ]
    assert run.nccl_version == "2.26.6+cuda12.8"
    assert run.rows == () and run.busbw_gbps is None
    assert run.status == "incomplete"


def test_elided_rows_without_a_footer_are_incomplete_but_keep_the_largest_size():
    run = _one("dranet_b200_1x2_allgather_elided.txt")
    assert run.collective == "all_gather"
    assert run.ranks == 2
    assert _hosts(run) == [("nccl-gib-test-0", 2, "NVIDIA B200")]
    assert run.elided and len(run.rows) == 8  # 64 MiB .. 8 GiB after the `...`
    assert run.busbw_gbps == 482.71 and run.largest.size_bytes == 8589934592
    assert run.avg_busbw_gbps is None
    assert run.status == "incomplete"


def test_two_nodes_of_two_gpus_count_four_ranks():
    run = _one("schmaustech_l40s_2x2.txt")
    assert run.collective == "all_reduce"
    assert run.ranks == 4  # nGpus 2 per process, two processes
    assert _hosts(run) == [
        ("nvidiatools-29-workload", 2, "NVIDIA L40S"),
        ("nvidiatools-30-workload", 2, "NVIDIA L40S"),
    ]
    assert run.nccl_version == "2.27.3+cuda12.9"
    assert len(run.rows) == 31  # 8 B .. 8 GiB
    assert run.busbw_gbps == 9.63 and run.avg_busbw_gbps == 4.74277
    assert run.status == "ok"


def test_an_old_layout_failed_footer_fails_the_run_despite_its_average():
    run = _one("nccl-tests-37_v100x8_allgather_oldfmt_FAILED.txt")
    assert run.collective == "all_gather"
    assert run.ranks == 8  # 4 GiB = 134217728 floats per rank x 8
    assert run.nodes == ()
    assert run.busbw_gbps == 129.05 and run.avg_busbw_gbps == 128.942
    assert run.out_of_bounds == 2
    assert run.status == "failed"


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*.txt")))
def test_only_whole_runs_without_wrong_values_are_ok(name):
    (run,) = parse((REAL / name).read_text())
    whole = run.rows and run.avg_busbw_gbps is not None and not run.out_of_bounds
    assert (run.status == "ok") == bool(whole)
