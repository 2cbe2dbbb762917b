"""Latency from an agent noticing a fact change to the aggregator's /metrics showing it.

Starts a real `plumb serve` (SQLite in a temp dir) and N agents in this process, each a
real StreamClient speaking gRPC on loopback with facts collected once from a shipped
profile. One change at a time, a random node's driver version is set to a new value; the
clock starts when that agent's collector first returns it and stops when a /metrics scrape
shows it. `--watch info` waits for the new version on plumb_node_info; `--watch drift`
changes the driver and waits for the node's baseline drift series on plumb_node_drift (every
node baselines its driver; those with a recipe driver also get recipe and pool findings),
then puts it back and waits for the series to go (not timed). Results: bench/results/<name>.json.

    .venv/bin/python bench/fact_to_metric.py [--agents 100] [--changes 200] [--watch info]
    .venv/bin/python bench/fact_to_metric.py --agents 1000 --changes 100 --watch drift \
        --poll-interval 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from harness import start_serve, wait_for, write_result

from plumb import facts as wire
from plumb.agent.collect import collect_all
from plumb.agent.settings import StreamSettings
from plumb.agent.simulate.node import Simulation
from plumb.agent.stream import Identity, StreamClient
from plumb.logs import configure_logging

PROFILES = ["dgx-h100", "hgx-a100", "h200", "l4", "l40s"]


class ChangingNode:
    """A node's facts that the benchmark can change, timing when the agent first sees it."""

    def __init__(self, facts: dict[str, wire.Reading]):
        self.facts = facts
        self.noticed: dict[str, float] = {}

    def set_driver(self, version: str) -> None:
        self.facts = {**self.facts, "driver.driver_version": wire.Reading.ok(version)}

    def collect(self) -> dict[str, wire.Reading]:
        facts = self.facts
        version = str(facts["driver.driver_version"].value)
        self.noticed.setdefault(version, time.perf_counter())
        return facts


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=100)
    p.add_argument("--changes", type=int, default=200)
    p.add_argument("--poll-interval", type=float, default=0.2)
    p.add_argument("--watch", choices=["info", "drift"], default="info")
    args = p.parse_args()
    configure_logging("WARNING")

    workdir = Path(tempfile.mkdtemp(prefix="plumb-bench-"))
    server, grpc_addr, base = await start_serve(workdir, f"sqlite:///{workdir}/bench.db")
    stop = asyncio.Event()
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            nodes = {}
            for i in range(args.agents):
                name = f"bench-{i:05d}"
                sim = Simulation(PROFILES[i % len(PROFILES)], name, workdir / name)
                nodes[name] = ChangingNode(collect_all(sim.sources()))
            settings = StreamSettings(poll_interval_s=args.poll_interval)
            clients = [
                StreamClient(grpc_addr, Identity(name, "bench", name), node.collect, settings)
                for name, node in nodes.items()
            ]
            tasks = [asyncio.create_task(c.run(stop)) for c in clients]
            await wait_for(
                lambda: http.get("/v1/nodes"),
                lambda r: sum(n["connected"] for n in r.json()) == args.agents,
                timeout_s=120,
            )
            latencies = []
            for k in range(args.changes):
                name = random.choice(list(nodes))
                node = nodes[name]
                original = str(node.facts["driver.driver_version"].value)
                version = f"999.{k}.{random.randrange(10**6)}"
                if args.watch == "info":
                    needle = f'driver_version="{version}"'
                else:  # any drift series of the node: every profile baselines its driver
                    needle = (
                        'plumb_node_drift{component="driver.driver_version",'
                        f'kind="baseline",node="{name}"'
                    )
                node.set_driver(version)
                await wait_for(
                    lambda: http.get("/metrics"),
                    lambda r, needle=needle: needle in r.text,
                    interval_s=0.005,
                )
                latencies.append(time.perf_counter() - node.noticed[version])
                if args.watch == "drift":
                    node.set_driver(original)
                    await wait_for(
                        lambda: http.get("/metrics"),
                        lambda r, needle=needle: needle not in r.text,
                        interval_s=0.05,
                    )
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), timeout=30)
    report(args, latencies)


def report(args: argparse.Namespace, latencies: list[float]) -> None:
    ms = sorted(x * 1000 for x in latencies)
    name = "fact_to_metric" if args.watch == "info" else "drift_to_metric"
    result = {
        "benchmark": name,
        "agents": args.agents,
        "changes": len(ms),
        "agent_poll_interval_s": args.poll_interval,
        "latency_ms": {
            "p50": round(statistics.median(ms), 1),
            "p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
            "max": round(ms[-1], 1),
            "mean": round(statistics.fmean(ms), 1),
        },
    }
    write_result(name, result)
    print(json.dumps(result["latency_ms"]), f"over {len(ms)} changes, {args.agents} agents")


if __name__ == "__main__":
    asyncio.run(main())
