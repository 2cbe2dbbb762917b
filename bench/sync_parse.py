"""What a new node's FullFacts costs the aggregator before its evaluation, step by step.

Makes `--nodes` distinct dgx-h100 nodes per pass (bench/nodes.py: each with its own hostname,
boot id and GPU UUIDs and serials) and takes each node's NodeFacts the way a cold sync does:
parsed from the bytes an agent sends, flattened (`plumb.facts.flatten`), hashed
(`content_hash`), and written as the node's first facts through the real Store on SQLite, in
batches of the store's `batch_max` as the intake writes them. Each pass has nodes new to the
process, as every node is at a cold start. The figure is process CPU time per node for each
step, the median of `--repeat` passes (this machine's timing moves by a third from pass to
pass), every pass listed too. `--profile` prints cProfile's top functions.

    .venv/bin/python bench/sync_parse.py --nodes 2000 --repeat 5
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from harness import write_result
from nodes import Profile

from plumb.aggregator.settings import StoreSettings
from plumb.aggregator.store import NodeUpdate, Store
from plumb.facts import content_hash, flatten, unflatten
from plumb.v1 import facts_pb2

STEPS = ("parse", "flatten", "digest", "store")


def one_pass(profile: Profile, store: Store, names: list[str]) -> dict[str, float]:
    """CPU-us per node of each step for the nodes `names`, all new to this process."""
    sent = [unflatten(profile.node_facts(n)).SerializeToString() for n in names]
    spent = dict.fromkeys(STEPS, 0.0)
    batch = StoreSettings().batch_max
    at = datetime.now(UTC)
    for i in range(0, len(names), batch):
        updates = []
        for name, data in zip(names[i : i + batch], sent[i : i + batch], strict=True):
            t0 = time.process_time()
            message = facts_pb2.NodeFacts.FromString(data)
            t1 = time.process_time()
            flat = flatten(message)
            t2 = time.process_time()
            digest = content_hash(flat)
            t3 = time.process_time()
            spent["parse"] += t1 - t0
            spent["flatten"] += t2 - t1
            spent["digest"] += t3 - t2
            updates.append(NodeUpdate(name, at, facts=flat, facts_own=True, content_hash=digest))
        t0 = time.process_time()
        store.apply(updates)
        spent["store"] += time.process_time() - t0
    spent["total"] = sum(spent.values())
    return {step: round(s / len(names) * 1e6, 1) for step, s in spent.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000, help="new nodes per pass")
    ap.add_argument("--repeat", type=int, default=5, help="passes; the median is the figure")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top 25")
    ap.add_argument("--name", default="sync_parse")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        profile = Profile.collect("dgx-h100", Path(tmp))
        store = Store(f"sqlite:///{tmp}/plumb.db")
        profiler = cProfile.Profile() if args.profile else None
        passes = []
        for k in range(args.repeat):
            names = [f"node-{k}-{i:05}" for i in range(args.nodes)]
            if profiler:
                profiler.enable()
            passes.append(one_pass(profile, store, names))
            if profiler:
                profiler.disable()
        store.close()
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)

    result = {
        "benchmark": "sync_parse",
        "nodes_per_pass": args.nodes,
        "facts_per_node": len(profile.facts),
        "cpu_us_per_node": {step: statistics.median(p[step] for p in passes) for step in passes[0]},
        "passes": passes,
    }
    print(write_result(args.name, result), result["cpu_us_per_node"])


if __name__ == "__main__":
    main()
