"""What one fact delta costs the aggregator: CPU from the delta's readings to the Ack's ticket.

A delta's Ack waits for every delta before it on the event loop: `fleet.py`'s ten probe
agents change a fact together every 0.5 s, so the last Ack waits for nine other deltas'
work. This fills SQLite with N dgx-h100 nodes through the real Store (bench/store_load.py),
restores them as `plumb serve` does and resumes each one's stream (bench/restore_cost.py),
so the delta meets a fleet-sized state, writer, metrics and drift. Then it sends deltas
the way the servicer takes one (`Ingest._delta`, without gRPC): the readings set on the
held facts (`apply_delta`, which checks each path), the agent's digest checked against the
result (`content_hash`), and `Intake.report`, which diffs, evaluates, renders and submits
the change to the writer. Each delta bumps `fleet.py`'s probe counter
(`gpus[0].ecc_uncorrected_aggregate`) on one of `--nodes-changing` nodes in turn. The
figure is this thread's CPU per delta, the median of `--runs` passes of `--deltas` each,
the servicer's part (apply and digest) and the intake's apart; the writer's thread, which
stores the changes meanwhile, is not counted. `--profile` prints cProfile's top functions
of one more pass.

    .venv/bin/python bench/delta_cost.py --nodes 10000 --db /tmp/delta.db
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from harness import write_result
from restore_cost import resume_all
from store_load import fill

from plumb import facts as wire
from plumb.aggregator import heap
from plumb.aggregator.process import Process, open_process
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.state.live import NodeState

PATH = "gpus[0].ecc_uncorrected_aggregate"  # fleet.py's CHANGE_PATH


async def _pass(
    p: Process, nodes: list[NodeState], seqs: dict[str, int], deltas: int
) -> tuple[float, float]:
    """`deltas` deltas over `nodes` in turn, each the next of its node's `seqs`: CPU seconds
    of the servicer's part and of the intake's, per delta."""
    servicer = intake = 0.0
    for k in range(deltas):
        node = nodes[k % len(nodes)]
        t0 = time.thread_time()
        old = node.reported.get(PATH)
        changed = {PATH: wire.Reading.ok(int(old.value if old else 0) + 1)}
        new = wire.apply_delta(node.reported, changed, [])
        digest = wire.content_hash(new)
        t1 = time.thread_time()
        seqs[node.name] += 1
        assert p.intake.report(node.name, seqs[node.name], new, digest) is not None
        t2 = time.thread_time()
        servicer += t1 - t0
        intake += t2 - t1
        if k % 10 == 9:
            await asyncio.sleep(0)  # the writer stores as the servicer's loop would let it
    await p.writer.flush(timeout_s=600)
    return servicer / deltas, intake / deltas


async def _run(db: Path, args: argparse.Namespace) -> dict:
    settings = AggregatorSettings(db=f"sqlite:///{db}", http_listen="127.0.0.1:0")
    p = await open_process(settings)
    writer = asyncio.create_task(p.writer.run())
    collector = asyncio.create_task(heap.run(settings.gc_full_pass_s))
    await p.restore()
    await resume_all(p)
    nodes = p.loaded[: args.nodes_changing]
    seqs = {n.name: 0 for n in nodes}
    await _pass(p, nodes, seqs, args.deltas)  # the counters' findings open: not timed
    passes = [await _pass(p, nodes, seqs, args.deltas) for _ in range(args.runs)]
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        await _pass(p, nodes, seqs, args.deltas)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    writer.cancel()
    collector.cancel()
    await asyncio.gather(writer, collector, return_exceptions=True)
    p.store.close()
    gc.unfreeze()
    servicer = statistics.median(s for s, _ in passes)
    intake = statistics.median(i for _, i in passes)
    totals = [s + i for s, i in passes]
    return {
        "nodes": len(p.loaded),
        "nodes_changing": args.nodes_changing,
        "deltas_per_pass": args.deltas,
        "runs": args.runs,
        "note": "CPU of this thread per delta, median of passes; the writer's thread not counted",
        "delta_cpu_us": round(statistics.median(totals) * 1e6, 1),
        "delta_cpu_us_passes": [round(t * 1e6, 1) for t in totals],
        "servicer_cpu_us": round(servicer * 1e6, 1),
        "intake_cpu_us": round(intake * 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--nodes-changing", type=int, default=10, help="fleet.py's --probes")
    ap.add_argument("--deltas", type=int, default=500, help="deltas per pass")
    ap.add_argument("--runs", type=int, default=5, help="timed passes")
    ap.add_argument("--db", type=Path, help="keep the database here (reused if it exists)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--name", default=None, help="results/delta_cost_<nodes>_<name>.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "plumb.db"
        if not db.exists():
            fill(db, args.nodes, Path(tmp))
        result = asyncio.run(_run(db, args))
    name = f"delta_cost_{args.nodes}" + (f"_{args.name}" if args.name else "")
    print(write_result(name, result))


if __name__ == "__main__":
    main()
