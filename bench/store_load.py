"""Store.load at fleet size: the aggregator's start reads every node's current facts.

Writes N nodes with a dgx-h100 profile's facts (as the agent's collectors give them, each
node with its own hostname, boot id and GPU UUIDs and serials: bench/nodes.py) into
SQLite through the real Store, then times `Store.load` and `Store.load_drift` in a fresh
Store, as `plumb serve` does after a restart. `--db` keeps the database for another run;
`--profile` prints the load's cProfile top functions.

    .venv/bin/python bench/store_load.py --nodes 10000
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from harness import write_result
from nodes import Profile

from plumb.aggregator.settings import StoreSettings
from plumb.aggregator.store import NodeUpdate, Store
from plumb.facts import content_hash

AT = datetime(2026, 1, 1, tzinfo=UTC)


def fill(db: Path, nodes: int, work: Path) -> int:
    """Write `nodes` nodes' first facts (a dgx-h100's, each with its own hostname, boot id and
    GPU UUIDs and serials), with their content hash, as a sync of an agent stores them (its
    own facts: no cluster overlay); the facts per node."""
    profile = Profile.collect("dgx-h100", work)
    store = Store(f"sqlite:///{db}")
    batch = StoreSettings().batch_max
    names = [f"node-{i:05}" for i in range(nodes)]
    for i in range(0, nodes, batch):
        updates = []
        for n in names[i : i + batch]:
            facts = profile.node_facts(n)
            updates.append(
                NodeUpdate(n, AT, facts=facts, facts_own=True, content_hash=content_hash(facts))
            )
        store.apply(updates)
    store.close()
    return len(profile.facts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--db", type=Path, help="keep the database here (reused if it exists)")
    ap.add_argument("--profile", action="store_true", help="print the load's cProfile top 25")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "plumb.db"
        per_node = fill(db, args.nodes, Path(tmp)) if not db.exists() else None
        store = Store(f"sqlite:///{db}")
        profiler = cProfile.Profile() if args.profile else None
        t = time.perf_counter()
        if profiler:
            profiler.enable()
        nodes = store.load()
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        store.load_drift()
        drift_s = time.perf_counter() - t
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        store.close()

    rows = sum(len(n.facts) for n in nodes)
    result = {
        "nodes": len(nodes),
        "facts": rows,
        "facts_per_node": per_node or rows // max(len(nodes), 1),
        "load_s": round(load_s, 2),
        "load_drift_s": round(drift_s, 2),
        "profiled": args.profile,
    }
    print(write_result(f"store_load_{len(nodes)}", result).read_text())


if __name__ == "__main__":
    main()
