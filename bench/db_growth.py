"""Database growth: a fleet's current facts plus N days of one stack change per node per day,
written through the real Store into SQLite; then one retention pass.

Each node has a dgx-h100 profile's facts (collected by the agent's collectors from the
simulated node). A day's stack change is a driver upgrade, one day forward and the next back,
with the facts it really changes (diffing two collections), plus the drift finding it
opens and the one it closes. Reports the file size after the first facts and after the days,
bytes per day, the size held at the retention age, and the retention pass's time.

    .venv/bin/python bench/db_growth.py --nodes 10000 --days 30
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import write_result

from plumb.agent.collect import collect_all
from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.profile import profile_path
from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.settings import StoreSettings
from plumb.aggregator.store import Change, NodeUpdate, Store
from plumb.facts import diff

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)
DRIVERS = ("580.95.05", "580.105.08")


def _facts_for(driver: str, workdir: Path) -> dict:
    """The dgx-h100 profile's facts with its driver set to ``driver``."""
    text = profile_path("dgx-h100").read_text()
    path = workdir / f"dgx-h100-{driver}.yaml"
    path.write_text(text.replace("580.173.02", driver))
    return collect_all(Simulation(str(path), "n", workdir / driver).sources())


def _finding(node: str, day: int) -> DriftFinding:
    """The driver finding day ``day``'s change opens (the next day's change closes it)."""
    return DriftFinding(
        id=f"{node}-{day}",
        node=node,
        kind="recipe",
        component="driver",
        expected=DRIVERS[0],
        observed=DRIVERS[day % 2],
        severity="warning",
        remediation="roll the node to the recipe's driver, or accept it as its baseline",
        recipe_hash="a" * 64,
        opened_at=DAY0 + timedelta(days=day),
    )


def _size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--batch", type=int, default=StoreSettings().batch_max)
    args = ap.parse_args()
    retention_days = StoreSettings().retention_days or 0

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        a, b = (_facts_for(d, work) for d in DRIVERS)
        changed, removed = diff(a, b)
        assert not removed, f"a driver change removed facts: {removed}"
        forward = tuple(Change(p, a[p], r) for p, r in changed.items())
        back = tuple(Change(c.path, c.new, c.old) for c in forward)
        assert forward, "the two driver versions collected the same facts"
        db = work / "plumb.db"
        store = Store(f"sqlite:///{db}")
        names = [f"node-{i:05}" for i in range(args.nodes)]

        t = time.perf_counter()
        for i in range(0, len(names), args.batch):
            store.apply([NodeUpdate(n, DAY0, facts=a) for n in names[i : i + args.batch]])
        load_s = time.perf_counter() - t
        store.prune(DAY0)  # nothing is old yet; checks the pass is cheap on a young database
        size_first = _size(db)

        t = time.perf_counter()
        for day in range(1, args.days + 1):
            at = DAY0 + timedelta(days=day)
            changes = forward if day % 2 else back
            updates = []
            for n in names:
                closed = () if day == 1 else (replace(_finding(n, day - 1), closed_at=at),)
                updates.append(
                    NodeUpdate(
                        n,
                        at,
                        changes,
                        facts=b if day % 2 else a,
                        opened=(_finding(n, day),),
                        closed=closed,
                    )
                )
            for i in range(0, len(updates), args.batch):
                store.apply(updates[i : i + args.batch])
        days_s = time.perf_counter() - t
        size_days = _size(db)
        per_day = (size_days - size_first) / args.days

        cutoff = DAY0 + timedelta(days=args.days // 2)
        t = time.perf_counter()
        pruned = store.prune(cutoff)
        prune_s = time.perf_counter() - t
        store.close()

    result = {
        "nodes": args.nodes,
        "days": args.days,
        "facts_per_node": len(a),
        "history_rows_per_change": len(forward),
        "write_s": {"first_facts": round(load_s, 1), "days": round(days_s, 1)},
        "db_bytes": {"first_facts": size_first, f"after_{args.days}_days": size_days},
        "bytes_per_day": round(per_day),
        "bytes_per_node_day": round(per_day / args.nodes),
        # SQLite reuses freed pages: at the retention age the file stops growing here.
        f"db_bytes_held_at_{retention_days:g}_days": round(size_first + retention_days * per_day),
        "prune": {
            "cutoff_day": args.days // 2,
            "rows": pruned,
            "seconds": round(prune_s, 2),
        },
    }
    print(write_result(f"db_growth_{args.nodes}", result).read_text())


if __name__ == "__main__":
    main()
