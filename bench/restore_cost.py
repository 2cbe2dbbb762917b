"""What a restart's restore costs: CPU per stored node, from the store to every node evaluated.

After a SIGKILL the aggregator loads every stored node and evaluates it (recipe, pool, drift,
rendered lines) before /readyz says `restored`; on one core that work competes with the
reconnecting agents' streams. This fills SQLite with N dgx-h100 nodes through the real Store
(bench/store_load.py), restores them once as `plumb serve` does so that their content hashes,
baselines and findings are stored as a running aggregator leaves them, then times restarts:
`open_process` (catalog, Store.load, Store.load_drift) and `Process.restore`, in CPU seconds
of this process. `--db` keeps the database for another run (or another revision's code).

    .venv/bin/python bench/restore_cost.py --nodes 10000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from harness import write_result
from store_load import fill

from plumb.aggregator.process import open_process
from plumb.aggregator.settings import AggregatorSettings


async def _restart(db: Path) -> dict[str, float]:
    """One start on `db`: CPU seconds to open the process and to restore its nodes."""
    settings = AggregatorSettings(db=f"sqlite:///{db}", http_listen="127.0.0.1:0")
    cpu = time.process_time()
    p = await open_process(settings)
    opened = time.process_time() - cpu
    writer = asyncio.create_task(p.writer.run())
    cpu = time.process_time()
    await p.restore()
    restored = time.process_time() - cpu
    await p.writer.flush(timeout_s=600)
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    p.store.close()
    return {"nodes": len(p.loaded), "open_cpu_s": opened, "restore_cpu_s": restored}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3, help="timed restarts after the first")
    ap.add_argument("--db", type=Path, help="keep the database here (reused if it exists)")
    ap.add_argument("--name", default=None, help="results/restore_cost_<nodes>_<name>.json")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "plumb.db"
        if not db.exists():
            fill(db, args.nodes, Path(tmp))
            asyncio.run(_restart(db))  # stores hashes, baselines and findings, as a run does
        runs = [asyncio.run(_restart(db)) for _ in range(args.runs)]

    nodes = runs[0]["nodes"]
    per_node_ms = sorted(r["restore_cpu_s"] * 1000 / max(nodes, 1) for r in runs)
    result = {
        "nodes": nodes,
        "runs": [{k: round(v, 3) for k, v in r.items()} for r in runs],
        "restore_cpu_ms_per_node": [round(v, 3) for v in per_node_ms],
        "restore_cpu_ms_per_node_median": round(per_node_ms[len(per_node_ms) // 2], 3),
    }
    name = f"restore_cost_{nodes}" + (f"_{args.name}" if args.name else "")
    print(write_result(name, result).read_text())


if __name__ == "__main__":
    main()
