"""nccl-tests' `all_reduce_perf`: run it, and read its text or JSON (`-J`) output.

The gate is the out-of-place bus bandwidth of the largest message size, never the footer's
"Avg bus bandwidth", which averages every size (small ones included) over both in-place and
out-of-place runs and so says little about the fabric. Bandwidths are GB/s with GB = 1e9.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["NcclRow", "NcclRun", "find_binary", "parse_json", "parse_text", "run"]

_RANK_PREFIX = re.compile(r"\[\d+\]")  # mpirun --tag-output style "[0]" prefixes


@dataclass(frozen=True)
class NcclRow:
    """One message size: bus bandwidths out of place and in place (GB/s)."""

    size_bytes: int
    busbw_out_gbps: float | None
    busbw_in_gbps: float | None
    wrong: int | None


@dataclass(frozen=True)
class NcclRun:
    """A whole run: its rows in size order and the footer's figures."""

    rows: tuple[NcclRow, ...]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    gpus: int | None

    @property
    def largest(self) -> NcclRow | None:
        return max(self.rows, key=lambda r: r.size_bytes, default=None)

    @property
    def gate_busbw_gbps(self) -> float | None:
        """Out-of-place busbw at the largest size (in-place when out-of-place is absent)."""
        row = self.largest
        if row is None:
            return None
        return row.busbw_out_gbps if row.busbw_out_gbps is not None else row.busbw_in_gbps


def _float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _int(token: str) -> int | None:
    value = _float(token)
    return None if value is None else int(value)


def parse_text(text: str) -> NcclRun:
    """Rows and footer of all_reduce_perf's stdout (with or without the `root` column)."""
    rows, avg, oob, gpus = [], None, None, None
    for raw in text.splitlines():
        line = _RANK_PREFIX.sub(" ", raw).strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            if body.startswith("Avg bus bandwidth"):
                avg = _float(body.split(":", 1)[1].split()[0])
            elif body.startswith("Out of bounds values"):
                oob = _int(body.split(":", 1)[1].split()[0])
            elif m := re.search(r"nThread (\d+) nGpus (\d+)", body):
                gpus = int(m.group(1)) * int(m.group(2))
            continue
        tokens = line.split()
        if not tokens[0].isdigit() or len(tokens) < 12:
            continue  # NCCL's own INFO/WARN lines and anything else
        # size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong [extra]
        has_root = len(tokens) >= 13 and re.fullmatch(r"-?\d+", tokens[4]) is not None
        body = tokens[5:] if has_root else tokens[4:]
        rows.append(
            NcclRow(
                size_bytes=int(tokens[0]),
                busbw_out_gbps=_float(body[2]),
                busbw_in_gbps=_float(body[6]) if len(body) > 6 else None,
                wrong=_int(body[3]),
            )
        )
    return NcclRun(tuple(sorted(rows, key=lambda r: r.size_bytes)), avg, oob, gpus)


def parse_json(text: str) -> NcclRun:
    """The report `all_reduce_perf -J FILE` writes."""
    doc = json.loads(text)
    rows = []
    for entry in doc.get("results") or []:
        out, inp = entry.get("out_of_place") or {}, entry.get("in_place") or {}
        wrong = out.get("nwrong", inp.get("nwrong"))
        rows.append(
            NcclRow(
                size_bytes=int(entry["size"]),
                busbw_out_gbps=out.get("bus_bw"),
                busbw_in_gbps=inp.get("bus_bw"),
                wrong=None if wrong is None else int(wrong),
            )
        )
    config = doc.get("config") or {}
    gpus = config.get("ngpus")
    if gpus is not None:
        gpus *= config.get("nthreads", 1)
    return NcclRun(
        tuple(sorted(rows, key=lambda r: r.size_bytes)),
        (doc.get("average_bus_bandwidth") or {}).get("bandwidth"),
        (doc.get("out_of_bounds") or {}).get("count"),
        gpus,
    )


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
    return parse_text(proc.stdout)
