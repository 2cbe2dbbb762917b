"""What scripts/gpu-check.sh runs on a machine with a real GPU: compare two fact sets, and run
the performance checks.

`compare A B` reads two `plumb-agent --once` outputs (the replay of the machine's own
`nvidia-smi -q -x`, and real NVML) and prints every fact whose reading differs, as
`path: A -> B`; exit 1 when any does. Facts only one side has are listed too. Readings are
compared whole (status, value, error, as `plumb.facts.Reading.to_json` writes them), so
`not_supported` on one side and a value on the other is a difference, which is what the
importer must get right. Sensor readings that move between two reads are left out.

`perf OUT` runs every performance check (agent/checks/performance.py) on this host the way a
validation run does (CheckRunner, the catalog's timeouts, default parameters) and writes the
outcomes, with the machine's load average, as JSON to OUT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plumb import tree
from plumb.agent.checks import CheckRunner
from plumb.agent.checks.performance import PERFORMANCE
from plumb.agent.main import make_node
from plumb.agent.settings import AgentSettings

__all__ = ["compare", "load_facts", "main"]

# Per check, seconds: the timeouts recipes/checks/performance.yaml gives validation runs,
# cut so all five fit the script's five minutes.
TIMEOUTS_S = {
    "matmul-bf16": 30.0,
    "matmul-fp16": 30.0,
    "memory-bandwidth": 20.0,
    "host-device-bandwidth": 20.0,
    "nccl-allreduce": 60.0,
}
# Readings (sensors) move between two reads; they are not what the importer must match.
_MOVING = ("temperature_celsius",)


Reading = Mapping[str, Any]  # a reading as JSON: status, value, error


def load_facts(path: Path) -> dict[str, Reading]:
    """The readings of one `plumb-agent --once` output, by fact path."""
    doc = json.loads(path.read_text())
    return dict(tree.leaves(doc["facts"]))


def compare(a: Mapping[str, Reading], b: Mapping[str, Reading]) -> tuple[list[str], list[str]]:
    """`path: A -> B` for every fact whose reading differs, by path: those `a` has a reading
    for (what the importer must match), and those `a` marks not_supported (what a capture
    does not carry: host files, libraries)."""
    carried, lacking = [], []
    for path in sorted(set(a) | set(b)):
        if path.endswith(_MOVING):
            continue
        left, right = a.get(path), b.get(path)
        if left != right:
            line = f"{path}: {_show(left)} -> {_show(right)}"
            absent = left is not None and left.get("status") == "not_supported"
            (lacking if absent else carried).append(line)
    return carried, lacking


def _show(r: Reading | None) -> str:
    if r is None:
        return "(absent)"
    if r.get("status") == "ok":
        return json.dumps(r.get("value"))
    return f"{r.get('status')}" + (f" ({r['error']})" if r.get("error") else "")


async def _perf() -> list[dict[str, Any]]:
    ctx = make_node(AgentSettings()).checks
    runner = CheckRunner(ctx)
    rows = []
    for check_id in PERFORMANCE:
        timed = await runner.run(check_id, {}, TIMEOUTS_S.get(check_id, 60.0))
        o = timed.outcome
        rows.append(
            {
                "check": check_id,
                "status": o.status,
                "message": o.message,
                "value": o.value,
                "unit": o.unit,
                "details": dict(o.details),
                "duration_s": round(timed.duration_s, 2),
            }
        )
        print(f"{check_id}: {o.status} {o.value if o.value is not None else ''} {o.unit}")
    return rows


def perf(out: Path) -> int:
    """Run the performance checks and write them as JSON to `out`."""
    rows = asyncio.run(_perf())
    result = {
        "host": socket.gethostname(),
        "checks": rows,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            # 1, 5 and 15 minute load averages as the run ends: what else the cores were doing.
            "load_avg": [round(x, 2) for x in os.getloadavg()],
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m plumb.agent.gpucheck", description=__doc__)
    sub = p.add_subparsers(dest="action", required=True)
    cmp = sub.add_parser("compare", help="print the facts where two --once outputs differ")
    cmp.add_argument("replayed", type=Path)
    cmp.add_argument("real", type=Path)
    run = sub.add_parser("perf", help="run the performance checks, write JSON")
    run.add_argument("out", type=Path)
    args = p.parse_args(argv)
    if args.action == "perf":
        return perf(args.out)
    carried, lacking = compare(load_facts(args.replayed), load_facts(args.real))
    print(f"== {len(carried)} fact(s) the capture carries differ from NVML:")
    print("\n".join(carried))
    print(f"== {len(lacking)} fact(s) the capture does not carry (not_supported in the replay):")
    print("\n".join(lacking))
    return 1 if carried else 0


if __name__ == "__main__":
    sys.exit(main())
