"""How stale one replica's view of another's nodes is: a change at replica A → visible at B.

Starts a throwaway PostgreSQL (tests/pg_fixture.py), two `plumb serve` replicas on it and N
agents in this process streaming to replica A, each a real StreamClient on loopback. One
change at a time, a random node's driver version is set to a new value; the clock starts
when that agent's collector first returns it and stops when `GET /v1/nodes/{name}` shows it,
on A (its own agent) and on B (through the database). Results:
bench/results/replica_lag.json.

    .venv/bin/python bench/replica_lag.py [--agents 100] [--changes 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from fact_to_metric import PROFILES, ChangingNode
from harness import start_serve, wait_for, write_result
from pg_fixture import PostgresServer, pg_bin  # tests/, which harness puts on the path

from plumb.agent.collect import collect_all
from plumb.agent.settings import StreamSettings
from plumb.agent.simulate.node import Simulation
from plumb.agent.stream import Identity, StreamClient
from plumb.aggregator.settings import ReplicaSettings
from plumb.logs import configure_logging


def _workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="plumb-bench-"))


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=100)
    p.add_argument("--changes", type=int, default=50)
    args = p.parse_args()
    configure_logging("WARNING")
    bindir = pg_bin()
    if bindir is None:
        sys.exit("PostgreSQL is not installed: apt-get install postgresql")
    pg = PostgresServer(bindir).start()
    procs = []
    stop = asyncio.Event()
    try:
        db = pg.create_database("bench")
        a_proc, a_grpc, a_url = await start_serve(_workdir(), db, PLUMB_REPLICA__NAME="replica-a")
        procs.append(a_proc)
        b_proc, _, b_url = await start_serve(_workdir(), db, PLUMB_REPLICA__NAME="replica-b")
        procs.append(b_proc)
        workdir = Path(tempfile.mkdtemp(prefix="plumb-bench-"))
        nodes = {}
        for i in range(args.agents):
            name = f"bench-{i:05d}"
            sim = Simulation(PROFILES[i % len(PROFILES)], name, workdir / name)
            nodes[name] = ChangingNode(collect_all(sim.sources()))
        settings = StreamSettings(poll_interval_s=0.2)
        clients = [
            StreamClient(a_grpc, Identity(name, "bench", name), node.collect, settings)
            for name, node in nodes.items()
        ]
        tasks = [asyncio.create_task(c.run(stop)) for c in clients]
        lag: dict[str, list[float]] = {"a": [], "b": []}
        async with (
            httpx.AsyncClient(base_url=a_url, timeout=10) as a,
            httpx.AsyncClient(base_url=b_url, timeout=10) as b,
        ):
            await wait_for(
                lambda: b.get("/v1/nodes"),
                lambda r: sum(n["connected"] for n in r.json()) == args.agents,
                timeout_s=180,
            )
            for k in range(args.changes):
                # Changes right after B's poll would always wait a whole interval: spread them.
                await asyncio.sleep(random.uniform(0, ReplicaSettings().poll_interval_s))
                name = random.choice(list(nodes))
                version = f"999.{k}.{random.randrange(10**6)}"
                nodes[name].set_driver(version)
                seen = await asyncio.gather(
                    *(_shows(http, name, version) for http in (a, b))
                )  # fmt: skip
                for key, at in zip(("a", "b"), seen, strict=True):
                    lag[key].append(at - nodes[name].noticed[version])
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), timeout=30)
        pg.remove()
    report(args, lag)


async def _shows(http: httpx.AsyncClient, name: str, version: str) -> float:
    """When `GET /v1/nodes/{name}` first shows the driver `version` (perf_counter)."""
    await wait_for(
        lambda: http.get(f"/v1/nodes/{name}"),
        lambda r: r.status_code == 200 and r.json()["driver_version"] == version,
        timeout_s=30,
        interval_s=0.01,
    )
    return time.perf_counter()


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in seconds)
    return {
        "p50": round(statistics.median(ms), 1),
        "p90": round(ms[int(len(ms) * 0.9)], 1),
        "p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
        "max": round(ms[-1], 1),
    }


def report(args: argparse.Namespace, lag: dict[str, list[float]]) -> None:
    result = {
        "benchmark": "replica_lag",
        "agents": args.agents,
        "changes": len(lag["b"]),
        "replica_poll_interval_s": ReplicaSettings().poll_interval_s,
        "change_to_replica_a_ms": _summary(lag["a"]),
        "change_to_replica_b_ms": _summary(lag["b"]),
        "load_average": os.getloadavg(),
    }
    write_result("replica_lag", result)
    print(json.dumps({k: v for k, v in result.items() if k.endswith("_ms")}))


if __name__ == "__main__":
    asyncio.run(main())
