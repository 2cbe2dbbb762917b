"""What one cold sync costs the aggregator: CPU-ms per agent, Hello to its first facts stored.

Starts a real `plumb serve` on an empty SQLite database, pinned to one CPU (as in the
issue-21 targets), and N simulated agents (default dgx-h100: 8 GPUs, ~370 facts) in agent
processes on the other CPUs, reusing bench/fleet.py's agents. The agents start at --rate a
second; the aggregator's CPU (utime + stime from /proc) is read before the ramp and once
every node is connected (synced: Welcome, FullFacts parsed, hashed, evaluated, stored,
rendered for /metrics and the node lists). CPU-ms per sync is that difference over N; the
same reading over an idle --idle-s window after the ramp (heartbeats only) is reported beside
it, so the per-sync figure can be judged against the floor.

The CPU is also split by thread name: Python threads all carry the process's name, gRPC's
core threads are `event_engine`. With --profile, py-spy samples the aggregator during the
ramp (`--format raw`, idle threads excluded; with --gil only the thread holding the GIL,
which is Python's CPU without SQLite's or gRPC's native work) and the result lists the
functions with most samples: own, inclusive, and inclusive among Plumb's own. py-spy is not
a dependency: install it in the venv to profile. Keep --rate below what the aggregator
syncs per second (busy fraction under 1), or refused Hellos add to the figure.

    .venv/bin/python bench/sync_cost.py --agents 1000 --rate 50 --name after
    .venv/bin/python bench/sync_cost.py --agents 1000 --rate 50 --profile --gil --name prof
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
from fleet import (
    Aggregator,
    loadavg,
    metric_values,
    thread_cpu_s,
    wait_connected,
    wait_ready,
    worker_main,
)
from harness import free_port, write_result

TOP = 30
REPO = Path(__file__).resolve().parents[1]
# Plumb's own code, as _frame names it: what the profile's third list keeps.
OURS = ("aggregator/", "agent/", "proto/")


def agents_main(conn, spec: dict) -> None:
    """An agent process of fleet.py's kind, with every node on spec["profiles"]."""
    import fleet

    fleet.PROFILES[:] = spec["profiles"]
    worker_main(conn, spec)


class Agents:
    """One agent process, driven like fleet.py's workers (status, ramp, stop)."""

    def __init__(self, ctx, spec: dict):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=agents_main, args=(child, spec), daemon=True)
        self.proc.start()

    async def ask(self, cmd: str, timeout_s: float = 300.0):
        self.conn.send(cmd)
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, self.conn.poll, timeout_s):
            raise TimeoutError(f"agent process did not answer {cmd!r}")
        return self.conn.recv()


def top_functions(raw: str, total: int, n: int = TOP) -> dict:
    """The `n` functions with most samples in py-spy's raw output (`frame;frame count` lines,
    outermost first), by own samples (leaf), inclusive samples (anywhere on the stack), and
    inclusive among Plumb's own functions, each as a percent of `total`."""
    own: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_frame(f) for f in stack.split(";")]
        frames = [f for f in frames if f is not None]
        if not frames:
            continue
        own[frames[-1]] += int(count)
        for f in set(frames):
            incl[f] += int(count)

    def pct(c: collections.Counter) -> list[list]:
        return [[f, round(100 * k / total, 1)] for f, k in c.most_common(n)]

    ours = collections.Counter({f: k for f, k in incl.items() if _where(f).startswith(OURS)})
    return {"own_pct": pct(own), "inclusive_pct": pct(incl), "plumb_inclusive_pct": pct(ours)}


def _frame(frame: str) -> str | None:
    """`function (path:line)` as `function (where)`, where is the path inside this repository,
    or inside site-packages or the standard library; None for py-spy's thread labels."""
    name, _, where = frame.partition(" (")
    if not where:
        return None
    path = Path(where.rstrip(")").rsplit(":", 1)[0])
    if path.is_relative_to(REPO):
        return f"{name} ({path.relative_to(REPO)})"
    parts = path.parts
    for anchor in ("site-packages", "python3.11"):
        if anchor in parts:
            parts = parts[parts.index(anchor) + 1 :]
            break
    return f"{name} ({'/'.join(parts[-3:])})"


def _where(frame: str) -> str:
    return frame.rsplit(" (", 1)[-1]


def samples_in(raw: str) -> int:
    return sum(int(c) for line in raw.splitlines() if (c := line.rpartition(" ")[2]).isdigit())


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--rate", type=float, default=100.0, help="agents started per second")
    p.add_argument("--profiles", default="dgx-h100", help="comma-separated simulated profiles")
    p.add_argument("--agent-processes", type=int, default=1)
    p.add_argument("--aggregator-cpu", type=int, default=0, help="the one CPU it runs on")
    p.add_argument("--idle-s", type=float, default=10.0, help="idle window after the ramp")
    p.add_argument("--profile", action="store_true", help="sample the ramp with py-spy")
    p.add_argument(
        "--gil",
        action="store_true",
        help="sample only the thread holding the GIL (Python's CPU; not SQLite's or gRPC's)",
    )
    p.add_argument("--rate-hz", type=int, default=100, help="py-spy samples per second")
    p.add_argument("--timeout-s", type=float, default=600.0)
    p.add_argument("--name", default=None, help="results/sync_cost_<agents>_<name>.json")
    args = p.parse_args()
    from plumb.logs import configure_logging

    configure_logging("ERROR")
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if args.profile and spy is None:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")

    workdir = Path(tempfile.mkdtemp(prefix="plumb-sync-"))
    db = f"sqlite:///{workdir}/sync.db"
    grpc_addr, http_port = f"127.0.0.1:{free_port()}", free_port()
    agg = Aggregator(db, grpc_addr, http_port, 30.0, workdir)
    others = os.sched_getaffinity(0) - {args.aggregator_cpu}
    if others:  # the agents (this process's children) stay off the aggregator's CPU
        agg.cpus = {args.aggregator_cpu}
        os.sched_setaffinity(0, others)
    profiles = args.profiles.split(",")
    result: dict = {
        "benchmark": "sync_cost",
        "agents": args.agents,
        "rate_per_s": args.rate,
        "profiles": profiles,
        "db": "sqlite",
        "aggregator_cpus": sorted(agg.cpus or os.sched_getaffinity(0)),
        "load_avg_before": loadavg(),
    }
    ctx = mp.get_context("spawn")
    procs: list[Agents] = []
    spy_proc = None
    try:
        await agg.start()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}", timeout=120) as http:
            await wait_ready(http)
            n = args.agent_processes
            for w in range(n):
                indices = list(range(w, args.agents, n))
                spec = {
                    "mode": "delta",
                    "grpc": grpc_addr,
                    "heartbeat_s": 30.0,
                    "change_rate": 0.0,
                    "backoff_max_s": None,
                    "reconnect_window_s": None,
                    "sensor_churn": None,
                    "sensor_interval_s": 15.0,
                    "workdir": str(workdir),
                    "indices": indices,
                    "poll_interval_s": 10.0,
                    "seed": w + 1,
                    "ramp_per_s": args.rate / n,
                    "profiles": profiles,
                }
                procs.append(Agents(ctx, spec))
            for a in procs:  # each answers once its agents are built and waiting for the ramp
                await a.ask("status")
            raw_out = workdir / "spy.txt"
            if args.profile:
                spy_proc = await asyncio.create_subprocess_exec(
                    spy, "record", "--pid", str(agg.pid), "--format", "raw", "--rate",
                    str(args.rate_hz), "--output", str(raw_out), "--nonblocking",
                    *(["--gil"] if args.gil else []),
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                )  # fmt: skip
                await asyncio.sleep(1.0)  # attached before the first Hello
            cpu0, t0 = agg.cpu_s(), time.monotonic()
            threads0 = thread_cpu_s(agg.pid)
            for a in procs:
                await a.ask("ramp")

            async def welcomed() -> int:  # asked of the agents: no /v1/nodes poll meanwhile
                return sum([(await a.ask("status"))["connected_once"] for a in procs])

            done = await wait_connected(http, args.agents, args.timeout_s, t0, welcomed)
            cpu1, t1 = agg.cpu_s(), time.monotonic()
            threads1 = thread_cpu_s(agg.pid)
            if spy_proc is not None:
                spy_proc.send_signal(signal.SIGINT)  # py-spy writes what it sampled, exits
                await asyncio.wait_for(spy_proc.wait(), timeout=60)
            statuses = [await a.ask("status") for a in procs]
            metrics = metric_values(
                (await http.get("/metrics")).text,
                {"plumb_store_dropped_updates_total", "plumb_ingest_resyncs_total"},
            )
            await asyncio.sleep(args.idle_s)
            cpu2 = agg.cpu_s()
            errors = collections.Counter()
            for s in statuses:
                errors.update(s["errors"])
            hellos = sum(s["attempts"] for s in statuses)
            sync_cpu_s = cpu1 - cpu0
            result["ramp"] = {
                "all_synced_s": done["seconds"],
                "connected": done["connected"],
                "hellos": hellos,
                "agent_errors": dict(errors),
                "aggregator_cpu_s": round(sync_cpu_s, 2),
                "cpu_ms_per_sync": round(1000 * sync_cpu_s / args.agents, 2),
                "aggregator_busy_fraction": round(sync_cpu_s / (t1 - t0), 2),
                # Where the CPU went, by thread name: the event loop is the process's own
                # name; gRPC's core threads run no Python, so py-spy never samples them.
                "cpu_ms_per_sync_by_thread": {
                    name: round(1000 * (cpu - threads0.get(name, 0.0)) / args.agents, 2)
                    for name, cpu in sorted(threads1.items(), key=lambda kv: -kv[1])
                    if cpu - threads0.get(name, 0.0) > 0
                },
                "resyncs": int(metrics.get("plumb_ingest_resyncs_total", 0)),
                "store_dropped_updates": int(metrics.get("plumb_store_dropped_updates_total", 0)),
                "load_avg_after": loadavg(),
            }
            result["idle"] = {
                "window_s": args.idle_s,
                "aggregator_cores": round((cpu2 - cpu1) / args.idle_s, 3),
            }
            result["aggregator_rss_mib"] = round(agg.rss_bytes() / 2**20, 1)
            if args.profile and raw_out.exists():
                raw = raw_out.read_text()
                total = samples_in(raw)
                result["profile"] = {
                    "tool": f"py-spy record --format raw --rate {args.rate_hz} --nonblocking"
                    + (" --gil" if args.gil else ""),
                    "samples": total,
                    **top_functions(raw, total),
                }
    finally:
        if spy_proc is not None and spy_proc.returncode is None:
            spy_proc.kill()
        for a in procs:
            try:
                await a.ask("stop", timeout_s=10)
            except (TimeoutError, OSError, EOFError):
                pass
            a.proc.join(timeout=30)
            if a.proc.is_alive():
                a.proc.kill()
        await agg.stop()
    result["load_avg_after"] = loadavg()
    name = f"sync_cost_{args.agents}" + (f"_{args.name}" if args.name else "")
    out = write_result(name, result)
    print(out.read_text())


if __name__ == "__main__":
    asyncio.run(main())
