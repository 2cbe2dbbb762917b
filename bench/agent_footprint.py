"""Footprint of one real `plumb-agent --simulate dgx-h100 --poll-interval 1` over a window.

Starts a real `plumb serve` (SQLite in a temp dir) and, --runs times in turn, one agent
process streaming to it; after a warm-up, reads the agent's CPU time and RSS from /proc over
--window-s seconds. The machine is shared, so each run records the load average before and
after it. Result: bench/results/agent_footprint.json (the worst run on top, every run listed).

    .venv/bin/python bench/agent_footprint.py [--window-s 60] [--runs 2] [--profile dgx-h100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from harness import free_port, serve_env

RESULTS = Path(__file__).parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def measure(
    args: argparse.Namespace, bindir: Path, grpc_addr: str, api: str, env: dict, work: Path
) -> dict:
    """One agent process: CPU share and RSS over the window, after the warm-up."""
    agent = subprocess.Popen(
        [
            str(bindir / "plumb-agent"),
            "--aggregator",
            grpc_addr,
            "--node-name",
            "fp-node",
            "--simulate",
            args.profile,
            "--poll-interval",
            str(args.poll_interval),
            "--log-level",
            "WARNING",
        ],
        env={**env, "PLUMB_SIM_WORKDIR": str(work / "sim")},
    )
    try:
        load_before = loadavg()
        time.sleep(args.warmup_s)
        c0, t0 = cpu_s(agent.pid), time.monotonic()
        rss = []
        while time.monotonic() - t0 < args.window_s:
            rss.append(rss_mib(agent.pid))
            time.sleep(1.0)
        c1, t1 = cpu_s(agent.pid), time.monotonic()
        nodes = httpx.get(f"{api}/v1/nodes").json()
    finally:
        stop(agent)
    return {
        "cpu_percent_of_core": round(100 * (c1 - c0) / (t1 - t0), 2),
        "rss_mib_max": round(max(rss), 1),
        "rss_mib_last": round(rss[-1], 1),
        "window_s": round(t1 - t0, 1),
        "load_avg_before": load_before,
        "load_avg_after": loadavg(),
        "connected": any(n["name"] == "fp-node" and n["connected"] for n in nodes),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--window-s", type=float, default=60.0)
    p.add_argument("--warmup-s", type=float, default=10.0)
    p.add_argument("--profile", default="dgx-h100")
    p.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=2, help="agents measured one after another")
    args = p.parse_args()
    bindir = Path(sys.executable).parent
    work = Path(tempfile.mkdtemp(prefix="plumb-agent-fp-"))
    grpc_addr, http_port = f"127.0.0.1:{free_port()}", free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server_env = {**env, **serve_env(work)}
    server = subprocess.Popen(
        [
            str(bindir / "plumb"),
            "serve",
            "--grpc-listen",
            grpc_addr,
            "--http-listen",
            f"127.0.0.1:{http_port}",
            "--db",
            f"sqlite:///{work}/fp.db",
            "--log-level",
            "ERROR",
        ],
        env=server_env,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{http_port}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        api = f"http://127.0.0.1:{http_port}"
        runs = [measure(args, bindir, grpc_addr, api, env, work) for _ in range(args.runs)]
    finally:
        stop(server)
    worst = max(runs, key=lambda r: r["cpu_percent_of_core"])
    result = {
        "benchmark": "agent_footprint",
        "profile": args.profile,
        "poll_interval_s": args.poll_interval,
        "window_s": args.window_s,
        "cpu_percent_of_core": worst["cpu_percent_of_core"],
        "rss_mib_max": max(r["rss_mib_max"] for r in runs),
        "runs": runs,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "agent_footprint.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
