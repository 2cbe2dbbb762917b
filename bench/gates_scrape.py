"""What a /metrics scrape spends on the rollout gates (`plumb_gate_open`) at fleet size.

Every scrape asks `Gates.all()`, which decides again the pools of the nodes touched since
the scrape before. Builds N simulated dgx-h100 nodes (each with its own hostname and GPU
UUIDs, bench/nodes.py) in a real LiveState, evaluated against the real recipe catalog (one
pool: every node the same hardware and OS), with their stack hashes as the intake sets them
and --canaries of them labelled canary. Then, in CPU milliseconds of this process, median of
--runs: `Gates.all()` with nothing touched, after one node's stack changed (a driver
upgrade between two scrapes), and after --touched nodes were touched (connections, findings,
facts: what moves between two back-to-back scrapes of a busy fleet).

    .venv/bin/python bench/gates_scrape.py --nodes 10000 --runs 9
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from harness import write_result
from nodes import Profile

from plumb.aggregator.drift import DriftEngine
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.gates import CANARY_FACT, Gates, ValidatedStacks
from plumb.aggregator.recipes import ResolutionCache, load_catalog
from plumb.aggregator.settings import GateSettings, RecipeSettings
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.state.stack import stack_hash
from plumb.facts import Reading

AT = datetime(2026, 12, 1, tzinfo=UTC)


def fleet(n: int, canaries: int, profile: Profile) -> tuple[LiveState, Gates]:
    """N connected, evaluated nodes of `profile`, the first `canaries` labelled canary."""
    catalog = load_catalog()
    state = LiveState()
    evaluator = Evaluator(
        state,
        ResolutionCache(catalog),
        RecipeSettings(),
        DriftEngine(catalog.drift, lambda: AT, xids=catalog.xids),
    )
    paths = evaluator.drift.rules.baseline.paths
    for i in range(n):
        name = f"gpu-{i:05d}"
        node = state.node(name, AT)
        node.facts = node.reported = profile.node_facts(name)
        if i < canaries:
            node.facts = {**node.facts, CANARY_FACT: Reading.ok(True)}
        node.connected = True
        node.stack_hash, node.stack_since = stack_hash(node.facts, paths), AT
        evaluator.node_changed(node)
    gates = Gates(state, evaluator, ValidatedStacks(state, dict), dict, GateSettings())
    return state, gates


def cpu_ms(prepare: Callable[[], None], gates: Gates, runs: int) -> float:
    """Median CPU ms of `gates.all()` after `prepare()`, over `runs`."""
    took = []
    for _ in range(runs):
        prepare()
        t = time.process_time()
        gates.all()
        took.append((time.process_time() - t) * 1000)
    return round(statistics.median(took), 3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--canaries", type=int, default=2)
    p.add_argument("--touched", type=int, default=40)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--name", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        profile = Profile.collect("dgx-h100", Path(tmp))
    state, gates = fleet(args.nodes, args.canaries, profile)
    t = time.process_time()
    first = gates.all()
    first_ms = (time.process_time() - t) * 1000
    names = [n.name for n in state.nodes()]
    upgraded = names[-1]
    stacks = iter(f"{k:064x}" for k in range(10**9))

    def upgrade() -> None:  # a driver upgrade moves the node's stack
        state.get(upgraded).stack_hash = next(stacks)  # type: ignore[union-attr]
        gates.touched(upgraded)

    def touch_many() -> None:
        for name in names[: args.touched]:
            gates.touched(name)

    result = {
        "benchmark": "gates_scrape",
        "nodes": args.nodes,
        "pools": len(first),
        "nodes_in_largest_pool": max(g.nodes for g in first),
        "canaries": args.canaries,
        "runs": args.runs,
        "cpu_ms": {
            "first": round(first_ms, 3),
            "nothing_touched": cpu_ms(lambda: None, gates, args.runs),
            "one_stack_changed": cpu_ms(upgrade, gates, args.runs),
            f"{args.touched}_touched": cpu_ms(touch_many, gates, args.runs),
        },
    }
    out = write_result(args.name or f"gates_scrape_{args.nodes}", result)
    print(result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
