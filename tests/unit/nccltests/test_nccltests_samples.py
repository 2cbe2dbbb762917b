"""nccl-tests output: the gate is out-of-place busbw at the largest size, not the average.

Samples follow all_reduce_perf's printf formats (src/util.cu writeResultHeader /
writeBenchmarkLineBody) and rows as published in NVIDIA/nccl#1530 (8x RTX 4090),
nccl-tests#290 (8x H100), NVIDIA/nccl#583 (older format without the `root` column) and
NVIDIA/nccl#1453 (mpirun `[0]` prefixes). The JSON report follows util.cu's writer (version
2): `devices`, one entry per process, sit inside `config`; booleans are the strings "true" and
"false".
"""

from __future__ import annotations

import json
from pathlib import Path

from plumb.nccltests import parse_json, parse_text

SAMPLES = Path(__file__).parent / "samples"

CURRENT = (SAMPLES / "current.txt").read_text()

OLD = (SAMPLES / "old.txt").read_text()

MPI = (SAMPLES / "mpi.txt").read_text()


def test_the_gate_is_out_of_place_busbw_at_the_largest_size_not_the_average():
    (run,) = parse_text(CURRENT)
    assert run.ranks == 8
    assert [r.size_bytes for r in run.rows] == [8388608, 16777216, 1073741824, 4294967296]
    assert run.largest.size_bytes == 4294967296
    assert run.busbw_gbps == 470.84
    assert run.avg_busbw_gbps == 335.42
    assert run.out_of_bounds == 0
    assert run.rows[0].busbw_in_gbps == 182.45 and run.rows[0].wrong == 0


def test_the_older_format_without_a_root_column_parses_the_same_columns():
    (run,) = parse_text(OLD)
    assert run.busbw_gbps == 219.38
    assert run.largest.busbw_in_gbps == 219.46
    assert run.avg_busbw_gbps == 118.0


def test_mpirun_rank_prefixes_are_ignored():
    (run,) = parse_text(MPI)
    assert run.busbw_gbps == 5.31
    assert len(run.rows) == 2


def test_output_without_rows_has_no_gate():
    (run,) = parse_text("# nThread 1 nGpus 2\n# Avg bus bandwidth    : 0\n")
    assert run.busbw_gbps is None and run.status == "incomplete"


def test_the_json_report_gives_the_same_gate():
    doc = {
        "args": ["./build/all_reduce_perf", "-b", "1G", "-e", "4G", "-g", "8", "-J", "r.json"],
        "nccl_version": 22102,
        "config": {
            "nthreads": 1,
            "ngpus": 8,
            "minimum_bytes": 8388608,
            "validation": 1,
            "devices": [
                {
                    "rank": 0,
                    "group": 0,
                    "pid": 28307,
                    "hostname": "gpu59",
                    "device": 0,
                    "device_hex": "0000:18:00",
                    "device_info": "NVIDIA H100 80GB HBM3",
                }
            ],
        },
        "results": [
            {
                "size": 1073741824,
                "count": 268435456,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": {"time": 4215.2, "alg_bw": 254.73, "bus_bw": 445.78, "nwrong": 0},
                "in_place": {"time": 4210.9, "alg_bw": 254.99, "bus_bw": 446.23, "nwrong": 0},
                "actual_iterations": 20,
                "experiment_name": "",
            },
            {
                "size": 4294967296,
                "count": 1073741824,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": {"time": 15963, "alg_bw": 269.05, "bus_bw": 470.84, "nwrong": 0},
                "in_place": {"time": 15941, "alg_bw": 269.43, "bus_bw": 471.5, "nwrong": 0},
                "actual_iterations": 20,
                "experiment_name": "",
            },
        ],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 458.59, "okay": "unchecked"},
    }
    run = parse_json(json.dumps(doc))
    assert run.busbw_gbps == 470.84 and run.ranks == 8 and run.status == "ok"
    assert run.avg_busbw_gbps == 458.59 and run.out_of_bounds == 0
    assert run.collective == "all_reduce" and run.nccl_version == "2.21.2"
    (node,) = run.nodes
    assert node.host == "gpu59" and node.devices == tuple(range(8))
