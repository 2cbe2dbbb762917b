"""`plumb demo`: an aggregator and six simulated GPU nodes on this machine, and a driver upgrade.

Everything runs as real processes on loopback: `plumb serve` on a temporary SQLite file,
and `plumb-agent --simulate` per node, each with its own copy of a shipped profile so
that editing the copy simulates an upgrade on that node alone; a what-if then judges two
rollouts and the safe one reaches two H100 nodes, one event on the fleet timeline. The API
listens on loopback only, so the demo allows anonymous read; validations need the admin
token it generates.
The H100 copies state benchmark figures, one node's 20 % under its twins': the validation
shows the baselines Plumb learns from the fleet and that node's `straggler` finding.
"""

from __future__ import annotations

import importlib.resources
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx
import yaml
from rich.console import Console

from plumb.aggregator.cli.render import baselines_table, drift_table, history_table, nodes_table

# Four H100 nodes "on EKS" and two A100 nodes "on GKE": two pools, as in a real fleet.
NODES = [(f"eks-h100-{i}", "dgx-h100") for i in range(1, 5)] + [
    (f"gke-a100-{i}", "hgx-a100") for i in range(1, 3)
]
UPGRADED_NODE, NEW_DRIVER = "eks-h100-1", "595.45.04"
# The what-if's safe driver then rolls out to two of the four H100 nodes, fabric manager with
# it, as a driver upgrade installs both: one event in `plumb changes`.
CANARIES = ("eks-h100-2", "eks-h100-3")
# A what-if of rolling the H100 pool back to R570: below the CUDA 12.9 runtime's minimum
# driver (575.51.03), on a branch past its end of life and below the recipe's R580 floor.
OLD_DRIVER = "570.195.03"
# Its GPU 3 reports uncorrected ECC errors and its NCCL all-reduce runs at a third of peak.
DEGRADED_NODE = "gke-a100-2"
# What the H100 nodes' simulated benchmarks measure: near what a healthy 8x H100 reaches
# (recipes/checks/performance.yaml's notes), and one node 20 % under its twins while still
# clearing the datasheet gates (315 GB/s and 494.5 TFLOPS): a straggler.
H100_FIGURES = {"nccl-allreduce": 460.0, "matmul-bf16": 700.0}
SLOW_NODE = "eks-h100-4"
SLOW_BY = 0.20
_TIMEOUT_S = 30.0


def _free_ports(count: int) -> list[int]:
    """Distinct TCP ports free on 127.0.0.1: all held open together, so none repeats."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _bin(name: str) -> str:
    """The console script installed beside this Python."""
    return str(Path(sys.executable).with_name(name))


def _command(name: str) -> str:
    """How a person runs the console script `name` from here: the bare name when the shell
    finds this one (an active venv), else its path, relative when under the working directory
    (`.venv/bin/plumb` from a checkout after `make demo`)."""
    path = Path(_bin(name))
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == path.resolve():
        return name
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _wait(what: str, check: Callable[[], bool], timeout_s: float = _TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _set_driver(profile: Path, version: str, *, fabric_manager: bool = False) -> None:
    spec = yaml.safe_load(profile.read_text())
    spec["driver"]["version"] = version
    if fabric_manager:
        spec["driver"]["fabric_manager_version"] = version
    profile.write_text(yaml.safe_dump(spec, sort_keys=False))


def _upgrade_and_watch_drift(out: Console, base: str, profile: Path) -> str:
    """Move one node's driver off its recipe; show the change, the drift and the metric."""
    old = httpx.get(f"{base}/v1/nodes/{UPGRADED_NODE}").json()["driver_version"]
    out.print(
        f"\n[bold]Upgrading[/] the driver on {UPGRADED_NODE}: {old} → {NEW_DRIVER} "
        f"(editing {profile.name}; the recipe says {old})"
    )
    started = time.monotonic()
    _set_driver(profile, NEW_DRIVER)

    def critical() -> list[dict]:
        return httpx.get(f"{base}/v1/drift", params={"severity": "critical"}).json()

    with out.status("waiting for the change and its drift findings…"):
        _wait("a critical drift finding", critical)
    out.print(f"drift detected in {time.monotonic() - started:.1f} s (agent polls every 0.5 s)")
    history = httpx.get(f"{base}/v1/nodes/{UPGRADED_NODE}/history").json()
    changes = [c for c in history if c["old"] is not None]
    out.print(history_table(changes, title=f"{UPGRADED_NODE}: changes since its first report"))
    out.print(drift_table(httpx.get(f"{base}/v1/drift").json()))
    metric = next(
        line
        for line in httpx.get(f"{base}/metrics").text.splitlines()
        if line.startswith("plumb_node_drift{")
        and f'node="{UPGRADED_NODE}"' in line
        and 'severity="critical"' in line
    )
    out.print("[bold]/metrics[/]")
    out.print(metric, markup=False, highlight=False)
    return old


def _roll_back(out: Console, base: str, profile: Path, version: str) -> None:
    """Put the driver back and watch every finding close."""
    out.print(f"\n[bold]Rolling back[/] {UPGRADED_NODE} to {version}")
    _set_driver(profile, version)
    with out.status("waiting for the findings to close…"):
        _wait("every drift finding to close", lambda: httpx.get(f"{base}/v1/drift").json() == [])
    closed = httpx.get(f"{base}/v1/drift", params={"include_closed": "true"}).json()
    out.print(f"drift cleared: {len(closed)} findings opened and closed, all kept as history")


def _whatif(out: Console, base: str) -> None:
    """Ask what two driver rollouts would do to the H100 pool: one blocked, one safe."""
    pool = next(
        r["pool"] for r in httpx.get(f"{base}/v1/nodes").json() if r["name"] == UPGRADED_NODE
    )
    out.print(f"\n[bold]What if[/] the pool {pool} took another driver? (nothing is changed)")
    for driver, expected in ((OLD_DRIVER, 1), (NEW_DRIVER, 0)):
        argv = ["whatif", "--driver", driver, "--pool", pool, "--server", base]
        result = subprocess.run([_bin("plumb"), *argv], capture_output=True, text=True)
        out.print(f"$ plumb {' '.join(argv)}", markup=False, highlight=False)
        out.print((result.stdout + result.stderr).rstrip(), markup=False, highlight=False)
        out.print(f"exit code {result.returncode}")
        if result.returncode != expected:
            raise RuntimeError(f"plumb whatif --driver {driver} exited {result.returncode}")


def _rollout(out: Console, base: str, profiles: dict[str, Path]) -> None:
    """Roll the safe driver out to part of the H100 pool; the fleet timeline shows one event."""
    since = datetime.now(UTC)  # the aggregator runs on this machine, on this clock
    out.print(f"\n[bold]Rolling out[/] {NEW_DRIVER} to {' and '.join(CANARIES)}")
    for node in CANARIES:
        _set_driver(profiles[node], NEW_DRIVER, fabric_manager=True)

    def rolled() -> bool:
        rows = {r["name"]: r for r in httpx.get(f"{base}/v1/nodes").json()}
        return all(rows[n]["driver_version"] == NEW_DRIVER for n in CANARIES)

    with out.status("waiting for both nodes to report it…"):
        _wait("the rollout's driver on both nodes", rolled)
    argv = [
        "changes",
        "--since",
        since.isoformat(),
        "--fact",
        "driver.driver_version",
        "--server",
        base,
    ]
    result = subprocess.run([_bin("plumb"), *argv], capture_output=True, text=True)
    out.print(f"$ plumb {' '.join(argv)}", markup=False, highlight=False)
    out.print((result.stdout + result.stderr).rstrip(), markup=False, highlight=False)
    if result.returncode != 0:
        raise RuntimeError(f"plumb changes failed with exit code {result.returncode}")


def _bundle(out: Console, base: str, workdir: Path) -> None:
    """Write a Helm bundle for one node's recipe and verify its checksums."""
    target = workdir / "bundle"
    node = "gke-a100-1"
    out.print(f"\n[bold]Bundling[/] the recipe of {node} for Helm, then verifying it")
    for argv in (
        ["bundle", "--node", node, "--deployer", "helm", "-o", str(target), "--server", base],
        ["verify", str(target)],
    ):
        result = subprocess.run([_bin("plumb"), *argv], capture_output=True, text=True)
        out.print(f"$ plumb {' '.join(argv)}", markup=False, highlight=False)
        out.print((result.stdout + result.stderr).rstrip(), markup=False, highlight=False)
        if result.returncode != 0:
            raise RuntimeError(f"plumb {argv[0]} failed with exit code {result.returncode}")


def _validate(out: Console, base: str, profile: Path, admin_env: dict[str, str]) -> None:
    """Degrade one node, then validate every node over HTTP; the degraded one must fail."""
    spec = yaml.safe_load(profile.read_text())
    spec["gpus"].setdefault("overrides", {})[3] = {
        "ecc": {"enabled": True, "uncorrected_volatile": 2}
    }
    spec["benchmarks"] = {"nccl-allreduce": 60.0}
    profile.write_text(yaml.safe_dump(spec, sort_keys=False))
    out.print(
        f"\n[bold]Validating[/] every node; {DEGRADED_NODE} now has ECC errors on GPU 3 and a "
        "slow NCCL all-reduce (simulated figure)"
    )

    def degraded() -> bool:
        facts = httpx.get(f"{base}/v1/nodes/{DEGRADED_NODE}").json()["facts"]
        return facts["gpus"][3]["ecc_uncorrected_volatile"]["value"] == 2

    _wait("the degraded node's facts", degraded)
    argv = ["validate", "--check", "ecc", "--check", "nccl-allreduce", "--check", "matmul-bf16"]
    argv += ["--server", base]
    started = time.monotonic()
    result = subprocess.run([_bin("plumb"), *argv], capture_output=True, text=True, env=admin_env)
    took = time.monotonic() - started
    out.print(f"$ plumb {' '.join(argv)}", markup=False, highlight=False)
    out.print(result.stdout.rstrip(), markup=False, highlight=False)
    out.print(f"validated {len(NODES)} nodes in {took:.1f} s (plumb validate, start to verdict)")
    out.print(f"exit code {result.returncode}: non-zero because {DEGRADED_NODE} failed")
    if result.returncode == 0:
        raise RuntimeError("the degraded node passed validation")


def _stragglers(out: Console, base: str) -> None:
    """Show what the fleet learned from that run, and the node slower than its twins."""

    def stragglers() -> list[dict]:
        return httpx.get(f"{base}/v1/drift", params={"kind": "straggler"}).json()

    _wait("a straggler finding", stragglers)
    out.print(
        f"\n[bold]Baselines[/] learned from the fleet: {SLOW_NODE} measures "
        f"{SLOW_BY:.0%} under its twins, though above the datasheet gates"
    )
    out.print(baselines_table(httpx.get(f"{base}/v1/baselines").json()))
    out.print(drift_table(stragglers()))


def _benchmarks(profile: Path, node: str) -> None:
    """State what an H100 node's simulated benchmarks measure; the slow one less."""
    spec = yaml.safe_load(profile.read_text())
    slow = 1 - SLOW_BY if node == SLOW_NODE else 1.0
    spec["benchmarks"] = {check: value * slow for check, value in H100_FIGURES.items()}
    profile.write_text(yaml.safe_dump(spec, sort_keys=False))


def _profile_copy(name: str, node: str, workdir: Path) -> Path:
    src = importlib.resources.files("plumb.agent.simulate.profiles").joinpath(f"{name}.yaml")
    dst = workdir / f"{node}.yaml"
    dst.write_text(src.read_text())
    return dst


def run_demo(out: Console, *, once: bool = False) -> int:
    """Run the tour, then keep everything up until Ctrl-C (or SIGTERM), unless `once`;
    returns the exit code."""
    workdir = Path(tempfile.mkdtemp(prefix="plumb-demo-"))
    grpc_port, http_port = _free_ports(2)
    grpc_addr = f"127.0.0.1:{grpc_port}"
    base = f"http://127.0.0.1:{http_port}"
    db = f"sqlite:///{workdir / 'plumb.db'}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        admin_token = workdir / "admin.token"
        admin_token.write_text(secrets.token_hex(16) + "\n")
        tokens = workdir / "api-tokens"
        tokens.write_text(f"demo-admin admin {admin_token.read_text()}")
        serve_env = {
            **env,
            "PLUMB_API__ANONYMOUS_READ": "true",
            "PLUMB_API__TOKENS_FILE": str(tokens),
        }
        admin_env = {**env, "PLUMB_API_TOKEN_FILE": str(admin_token)}
        log = stack.enter_context((workdir / "processes.log").open("w"))

        def start(*argv: str, env: dict[str, str] = env) -> subprocess.Popen:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env)
            stack.callback(_stop, proc)
            return proc

        with out.status("starting the aggregator…"):
            start(
                _bin("plumb"),
                "serve",
                "--grpc-listen",
                grpc_addr,
                "--http-listen",
                base.removeprefix("http://"),
                "--db",
                db,
                env=serve_env,
            )
            _wait("the aggregator's /readyz", lambda: httpx.get(f"{base}/readyz").is_success)
        out.print(f"[bold]aggregator[/] gRPC {grpc_addr}, HTTP {base}, database {db}")
        out.print(f"anonymous read on loopback; the admin token is in {admin_token}")

        profiles = {}
        with out.status(f"starting {len(NODES)} simulated GPU nodes…"):
            for node, profile in NODES:
                profiles[node] = _profile_copy(profile, node, workdir)
                if profile == "dgx-h100":
                    _benchmarks(profiles[node], node)
                start(
                    _bin("plumb-agent"),
                    "--aggregator",
                    grpc_addr,
                    "--node-name",
                    node,
                    "--simulate",
                    str(profiles[node]),
                    "--poll-interval",
                    "0.5",
                    "--log-level",
                    "WARNING",
                )

            def all_connected() -> bool:
                rows = httpx.get(f"{base}/v1/nodes").json()
                return sum(r["connected"] for r in rows) == len(NODES)

            _wait("every node to connect", all_connected)
        out.print(nodes_table(httpx.get(f"{base}/v1/nodes").json()))

        old = _upgrade_and_watch_drift(out, base, profiles[UPGRADED_NODE])
        _roll_back(out, base, profiles[UPGRADED_NODE], old)
        _whatif(out, base)
        _rollout(out, base, profiles)
        _bundle(out, base, workdir)
        _validate(out, base, profiles[DEGRADED_NODE], admin_env)
        _stragglers(out, base)

        if once:
            out.print("\nstopping the aggregator and the agents (--once)…")
            return 0
        plumb = _command("plumb")
        node_url = f"{base}/v1/nodes/{UPGRADED_NODE}"
        tries = [
            f"{base}/  (the fleet page)",
            f"{base}/v1/nodes",
            node_url,
            f"{node_url}/history",
            f"{node_url}/recipe",
            f"{base}/v1/drift?include_closed=true",
            f"{base}/v1/baselines",
            f"{base}/v1/snapshot?format=yaml",
            f"{base}/metrics",
            f"{base}/docs",
            f"{plumb} nodes --server {base}",
            f"{plumb} drift --server {base}",
            f"{plumb} baselines --server {base}",
            f"{plumb} recipe --node {UPGRADED_NODE} --server {base}",
            f"{plumb} whatif --driver {OLD_DRIVER} --server {base}",
            f"PLUMB_API_TOKEN_FILE={admin_token} {plumb} validate --server {base}",
        ]
        out.print("\n[bold]Try[/]")
        out.print("  " + "\n  ".join(tries), markup=False, highlight=False)
        out.print("\nRunning until Ctrl-C…")
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
        out.print("stopping the aggregator and the agents…")
    out.print('done. Next: the README\'s "Running it", or `make test`.')
    return 0
