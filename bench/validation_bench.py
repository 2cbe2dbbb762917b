"""Wall time of a cluster-wide conformance + performance validation on N simulated nodes.

Starts a real `plumb serve` (SQLite in a temp dir) and N agents in this process, each a real
StreamClient with a real CheckRunner over a simulated node's facts (collected once from a
shipped profile). Simulated benchmarks take 0 s (half the nodes' profiles state NCCL and
memory figures, the rest skip as `simulated node`), so the figure is Plumb's own overhead:
POST /v1/validations -> RunChecks on every stream -> CheckResults back -> graded -> stored
-> GET shows the run finished. Results: bench/results/validation.json.

    .venv/bin/python bench/validation_bench.py [--agents 100 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from harness import ADMIN_HEADERS, start_serve, wait_for, write_result

from plumb.agent.checks import CheckContext, CheckRunner
from plumb.agent.collect import collect_all
from plumb.agent.settings import StreamSettings
from plumb.agent.simulate.node import Simulation
from plumb.agent.stream import Identity, StreamClient
from plumb.logs import configure_logging

PROFILES = ["dgx-h100", "hgx-a100", "h200", "l4", "l40s"]
FIGURES = {"nccl-allreduce": 400.0, "memory-bandwidth": 2800.0}


async def fleet_run(agents: int, runs: int, workdir: Path) -> dict:
    db = f"sqlite:///{workdir}/bench-{agents}.db"
    server, grpc_addr, base = await start_serve(workdir, db)
    stop = asyncio.Event()
    walls: list[float] = []
    try:
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=ADMIN_HEADERS) as http:
            sources = {p: Simulation(p, f"bench-{p}", workdir / p).sources() for p in PROFILES}
            facts_by_profile = {p: collect_all(src) for p, src in sources.items()}
            clients = []
            for i in range(agents):
                name = f"bench-{i:05d}"
                profile = PROFILES[i % len(PROFILES)]
                facts = facts_by_profile[profile]
                figures = FIGURES if i % 2 else {}
                ctx = CheckContext(
                    collect=lambda facts=facts: facts,
                    nvml=lambda src=sources[profile]: src.nvml,
                    pci_gpu_count=lambda facts=facts: sum(p.endswith("].uuid") for p in facts),
                    simulated=True,
                    simulated_figures=lambda figures=figures: figures,
                )
                clients.append(
                    StreamClient(
                        grpc_addr,
                        Identity(name, "bench", name),
                        lambda facts=facts: facts,
                        StreamSettings(poll_interval_s=5, heartbeat_interval_s=30),
                        CheckRunner(ctx),
                    )
                )
            tasks = [asyncio.create_task(c.run(stop)) for c in clients]
            await wait_for(
                lambda: http.get("/v1/nodes"),
                lambda r: sum(n["connected"] for n in r.json()) == agents,
                timeout_s=300,
            )
            summary = None
            for _ in range(runs):
                start = time.perf_counter()
                resp = await http.post(
                    "/v1/validations", json={"phases": ["conformance", "performance"]}
                )
                resp.raise_for_status()
                run_id = resp.json()["id"]
                # Poll the list (progress, no results): a 12,000-result body per poll would
                # load the aggregator being measured.
                done = await wait_for(
                    lambda: http.get("/v1/validations"),
                    lambda r, run_id=run_id: (
                        next(x for x in r.json() if x["id"] == run_id)["state"] == "finished"
                    ),
                    timeout_s=120,
                    interval_s=0.01,
                )
                walls.append(time.perf_counter() - start)
                summary = next(x for x in done.json() if x["id"] == run_id)["progress"]
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), timeout=60)
    return {
        "agents": agents,
        "runs": runs,
        "checks_per_node": summary["total"] // agents,
        "results_per_run": summary["total"],
        "last_run": {k: summary[k] for k in ("pass", "fail", "warn", "skip", "error", "pending")},
        "wall_s": {
            "median": round(statistics.median(walls), 3),
            "max": round(max(walls), 3),
            "min": round(min(walls), 3),
        },
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    configure_logging("WARNING")
    workdir = Path(tempfile.mkdtemp(prefix="plumb-vbench-"))
    fleets = [await fleet_run(n, args.runs, workdir) for n in args.agents]
    result = {
        "benchmark": "validation_fanout",
        "what": "POST /v1/validations (conformance + performance) until GET says finished; "
        "agents in the benchmark process, aggregator in its own",
        "target_s_at_1000_nodes": 5.0,
        "fleets": fleets,
    }
    write_result("validation", result)
    for f in fleets:
        print(f"{f['agents']} nodes: wall {f['wall_s']} s, last run {f['last_run']}")


if __name__ == "__main__":
    asyncio.run(main())
