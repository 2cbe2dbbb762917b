"""What a restart's restore costs: CPU per stored node, from the store to every node evaluated.

After a SIGKILL the aggregator loads every stored node and evaluates it (recipe, pool, drift,
rendered lines) before /readyz says `restored`; on one core that work competes with the
reconnecting agents' streams. This fills SQLite with N dgx-h100 nodes through the real Store
(bench/store_load.py), restores them once as `plumb serve` does so that their content hashes,
baselines and findings are stored as a running aggregator leaves them, then times restarts:
`open_process` (catalog, Store.load, Store.load_drift), `Process.restore`, and every node's
resume, in CPU seconds of this process. As in `plumb serve`, the store is opened under the
collector's default policy and the restore and resumes run under the aggregator's own
(`heap.run`: survivors frozen, young passes on a timer). A resume is what the servicer does
for an agent whose Hello names the facts held (the storm's reconnect, without gRPC): check
its digest against the restored facts (`NodeState.resent_by`), then mark the node connected
on the new stream (`Intake.report`) and store that. `--db` keeps the database for another
run (or another revision's code).

    .venv/bin/python bench/restore_cost.py --nodes 10000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path

from harness import write_result
from store_load import fill

from plumb.aggregator import heap
from plumb.aggregator.intake.intake import StreamStart
from plumb.aggregator.process import Process, open_process
from plumb.aggregator.settings import AggregatorSettings


async def resume_all(p: Process) -> None:
    """Every loaded node's stream resumed as the servicer resumes one (the storm's reconnect,
    without gRPC), until the writer has stored them all."""
    for i, node in enumerate(p.loaded):
        digest = node.content_hash
        assert node.resent_by(digest), f"{node.name}: stored facts do not hash as stored"
        start = StreamStart(f"bench-{i}", node.boot_id, node.agent_version)
        assert p.intake.report(node.name, 0, node.reported, digest, start) is not None
        if i % 500 == 0:
            await asyncio.sleep(0)  # the writer stores as the servicer's loop would let it
    await p.writer.flush(timeout_s=600)


async def _restart(db: Path) -> dict[str, float]:
    """One start on `db`: CPU seconds to open the process, to restore its nodes and to resume
    each one's stream."""
    settings = AggregatorSettings(db=f"sqlite:///{db}", http_listen="127.0.0.1:0")
    cpu = time.process_time()
    p = await open_process(settings)
    opened = time.process_time() - cpu
    writer = asyncio.create_task(p.writer.run())
    collector = asyncio.create_task(heap.run(settings.gc_full_pass_s))
    cpu = time.process_time()
    await p.restore()
    restored = time.process_time() - cpu
    await p.writer.flush(timeout_s=600)
    cpu = time.process_time()
    await resume_all(p)
    resumed = time.process_time() - cpu
    writer.cancel()
    collector.cancel()
    await asyncio.gather(writer, collector, return_exceptions=True)
    p.store.close()
    gc.unfreeze()  # the next restart starts from a heap of its own
    return {
        "nodes": len(p.loaded),
        "open_cpu_s": opened,
        "restore_cpu_s": restored,
        "resume_cpu_s": resumed,
    }


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
    result: dict = {"nodes": nodes, "runs": [{k: round(v, 3) for k, v in r.items()} for r in runs]}
    for phase in ("restore", "resume"):
        per_node_ms = sorted(r[f"{phase}_cpu_s"] * 1000 / max(nodes, 1) for r in runs)
        result[f"{phase}_cpu_ms_per_node"] = [round(v, 3) for v in per_node_ms]
        result[f"{phase}_cpu_ms_per_node_median"] = round(per_node_ms[len(per_node_ms) // 2], 3)
    name = f"restore_cost_{nodes}" + (f"_{args.name}" if args.name else "")
    print(write_result(name, result).read_text())


if __name__ == "__main__":
    main()
