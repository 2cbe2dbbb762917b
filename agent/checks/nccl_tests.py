"""nccl-tests' `all_reduce_perf` on this node: find it and run one intra-node sweep.

Reading its output is `plumb.nccltests`, shared with the aggregator, which grades logs of
runs launched elsewhere (Slurm, MPI operators) with the same parser.
"""

from __future__ import annotations

import shutil
import subprocess

from plumb.nccltests import NcclRun, parse_text

__all__ = ["find_binary", "run"]


def find_binary() -> str | None:
    """all_reduce_perf on PATH, if nccl-tests is installed on the node."""
    return shutil.which("all_reduce_perf")


def run(binary: str, gpus: int, max_bytes: str, timeout_s: float) -> NcclRun:
    """One intra-node all-reduce sweep on `gpus` GPUs up to `max_bytes` (e.g. "4G")."""
    proc = subprocess.run(
        [binary, "-b", "8M", "-e", max_bytes, "-f", "2", "-g", str(gpus), "-c", "1"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"all_reduce_perf exited {proc.returncode}: {' | '.join(tail)}")
    runs = parse_text(proc.stdout)
    if len(runs) != 1:
        raise RuntimeError(f"all_reduce_perf printed {len(runs)} runs where one was started")
    return runs[0]
