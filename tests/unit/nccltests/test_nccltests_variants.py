"""Variants of the real logs for every class of input the parser must read.

Each variant is made from a real log (tests/data/real/nccl-tests/) by a launcher's or a
person's hand: prefixes, concatenation, cuts, wrong values; expected figures are the ones
read by hand from the original log. The JSON report and the per-iteration table follow
nccl-tests' src/util.cu writers.
"""

from __future__ import annotations

import json
from pathlib import Path

from plumb.nccltests import parse

REAL = Path(__file__).parents[2] / "data" / "real" / "nccl-tests"
SUPERBENCH = (REAL / "superbench_a100x8.txt").read_text()
L40S = (REAL / "schmaustech_l40s_2x2.txt").read_text()
H200 = (REAL / "dranet_h200_2x1_mpi_noise.txt").read_text()
SRUN = (REAL / "awsome_p5_2x8_srun_prefix.txt").read_text()


def _prefixed(text: str, prefix: str) -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True))


def test_open_mpi_tag_output_prefixes_change_nothing():
    (run,) = parse(_prefixed(SUPERBENCH, "[1,0]<stdout>:"))
    assert run.collective == "all_reduce" and run.ranks == 8
    assert [(n.host, n.gpus) for n in run.nodes] == [("localhost", 8)]
    assert run.busbw_gbps == 235.26 and run.avg_busbw_gbps == 68.4048
    assert run.status == "ok" and len(run.rows) == 34


def test_srun_pdsh_and_timestamp_prefixes_change_nothing():
    for prefix in ("3: ", "gpu-node-7: ", "2025-03-01T10:00:00.123456Z ", "[pod/w-0/mpi] "):
        (run,) = parse(_prefixed(L40S, prefix))
        assert run.ranks == 4, prefix
        assert [(n.host, n.gpus) for n in run.nodes] == [
            ("nvidiatools-29-workload", 2),
            ("nvidiatools-30-workload", 2),
        ], prefix
        assert run.busbw_gbps == 9.63 and run.avg_busbw_gbps == 4.74277, prefix
        assert run.status == "ok", prefix


def test_two_runs_in_one_file_are_split_and_judged_alone():
    runs = parse(SUPERBENCH + L40S)
    assert [(r.collective, r.ranks, r.busbw_gbps, r.status) for r in runs] == [
        ("all_reduce", 8, 235.26, "ok"),
        ("all_reduce", 4, 9.63, "ok"),
    ]
    assert runs[1].nccl_version == "2.27.3+cuda12.9" and runs[0].nccl_version is None


def test_a_cut_run_followed_by_a_whole_one_stays_incomplete():
    runs = parse(SRUN + H200)
    assert [(r.busbw_gbps, r.avg_busbw_gbps, r.status) for r in runs] == [
        (487.09, None, "incomplete"),
        (31.89, 15.5188, "ok"),
    ]


def test_rows_after_a_footer_without_a_new_preamble_start_another_run():
    table = [line for line in L40S.splitlines() if line.strip()[:1].isdigit()]
    footer = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 4.74277\n"
    runs = parse("\n".join(table) + "\n" + footer + "\n".join(table[:5]) + "\n")
    assert [(len(r.rows), r.status) for r in runs] == [(31, "ok"), (5, "incomplete")]


def test_a_wrong_count_in_a_row_fails_the_run():
    bad = L40S.replace(
        "  8589934592    2147483648     float     sum      -1  1338003    6.42    9.63      0",
        "  8589934592    2147483648     float     sum      -1  1338003    6.42    9.63     12",
    )
    assert bad != L40S
    (run,) = parse(bad)
    assert run.largest.wrong_out == 12 and run.largest.wrong_in == 0
    assert run.status == "failed"


def test_a_test_failure_line_fails_a_run_cut_mid_table():
    cut = L40S.split("     1048576")[0]
    text = (
        cut + "nvidiatools-30-workload: Test NCCL failure common.cu:1021 'unhandled system error'\n"
    )
    (run,) = parse(text)
    assert len(run.rows) == 17  # 8 B .. 512 KiB before the cut
    assert run.status == "failed" and "Test NCCL failure" in run.errors[0]


def test_the_average_check_failing_fails_the_run():
    text = L40S.replace(
        "# Avg bus bandwidth    : 4.74277 ", "# Avg bus bandwidth    : 4.74277 FAILED"
    )
    (run,) = parse(text)
    assert run.avg_busbw_gbps == 4.74277 and run.status == "failed"


def test_an_elision_inside_a_whole_run_keeps_it_ok():
    lines = SUPERBENCH.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("4 "))
    elided = "\n".join([*lines[:start], "...", *lines[start + 20 :]]) + "\n"
    (run,) = parse(elided)
    assert run.elided and len(run.rows) == 14
    assert run.busbw_gbps == 235.26 and run.status == "ok"


# Made after util.cu's writeResultHeader with per_iter_timing on (a newer option).
PER_ITER = (Path(__file__).parent / "samples" / "per_iteration.txt").read_text()


def test_the_per_iteration_columns_of_newer_versions_are_skipped_by_name():
    (run,) = parse(PER_ITER)
    assert run.nccl_tests_version == "2.17.6" and run.nccl_version == "2.28.3"
    assert run.busbw_gbps == 69.44 and run.largest.busbw_in_gbps == 69.67
    assert run.largest.wrong == 0 and run.status == "ok"


def _json_report() -> dict:
    """A -J report of a 2-node all_reduce (one process per node, 2 GPUs each)."""

    def device(rank: int, host: str) -> dict:
        return {
            "rank": rank,
            "group": 0,
            "pid": 100 + rank,
            "hostname": host,
            "device": 0,
            "device_hex": "0000:18:00",
            "device_info": "NVIDIA H100 80GB HBM3",
        }

    def result(size: int, busbw: float, wrong: int) -> dict:
        place = {"time": 100.0, "alg_bw": busbw / 1.5, "bus_bw": busbw, "nwrong": wrong}
        return {
            "size": size,
            "count": size // 4,
            "type": "float",
            "redop": "sum",
            "root": "    -1",
            "out_of_place": place,
            "in_place": dict(place, bus_bw=busbw + 1),
            "actual_iterations": 20,
            "experiment_name": "",
        }

    return {
        "version": 2,
        "start_time": "2025-03-01 10:00:00",
        "args": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "1G", "-e", "2G", "-g", "2"],
        "env": [],
        "nccl_version": 22703,
        "config": {
            "nthreads": 1,
            "ngpus": 2,
            "minimum_bytes": 1073741824,
            "maximum_bytes": 2147483648,
            "step_factor": 2,
            "validation": 1,
            "devices": [device(0, "node-a"), device(2, "node-b")],
        },
        "results": [result(1073741824, 180.5, 0), result(2147483648, 190.25, 0)],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 185.375, "okay": "unchecked"},
        "errors": [],
        "end_time": "2025-03-01 10:00:09",
    }


def test_the_json_report_gives_ranks_per_process_and_hosts():
    (run,) = parse(json.dumps(_json_report(), indent=1))
    assert run.collective == "all_reduce" and run.ranks == 4
    assert [(n.host, n.ranks, n.devices) for n in run.nodes] == [
        ("node-a", (0, 1), (0, 1)),
        ("node-b", (2, 3), (0, 1)),
    ]
    assert run.nccl_version == "2.27.3"
    assert run.busbw_gbps == 190.25 and run.avg_busbw_gbps == 185.375
    assert run.status == "ok"


def test_a_json_report_with_wrong_values_fails_and_a_cut_one_is_incomplete():
    doc = _json_report()
    doc["results"][0]["out_of_place"]["nwrong"] = 7
    doc["out_of_bounds"] = {"count": 7, "okay": "false"}
    (run,) = parse(json.dumps(doc))
    assert run.status == "failed" and run.out_of_bounds == 7
    text = json.dumps(_json_report())
    (cut,) = parse(text[: text.index('"results"') + 40])
    assert cut.status == "incomplete" and cut.rows == ()


def test_text_with_no_run_in_it_has_no_runs():
    assert parse("Initializing SSH...\nHello from node-a\n") == ()
