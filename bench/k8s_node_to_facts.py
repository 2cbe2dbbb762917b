"""Latency from a Node change in the API server to the aggregator's node facts, and failover.

Starts the real test control plane (tests/integration/k8s/conftest.py's ControlPlane: etcd and
kube-apiserver built by scripts/build-k8s-control-plane.sh), a real `plumb serve` with its
Kubernetes side and one simulated agent whose node exists as a Node. Each change patches a
label on the Node; the clock starts when the PATCH returns and stops when GET /v1/nodes/{name}
shows the label. Then `--failovers` times: two replicas campaign for one Lease, the leader is
SIGKILLed, and the clock stops when the other's /metrics says plumb_leader 1 (the lease
duration is `--lease-duration`). Results: bench/results/k8s_node_to_facts.json.

    .venv/bin/python bench/k8s_node_to_facts.py [--changes 50] [--failovers 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from kubernetes import client

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "integration"), str(ROOT / "tests")]
from conftest import PROFILES, free_port  # noqa: E402  (tests/integration/conftest.py)
from harness import serve_env  # noqa: E402
from k8s.conftest import ControlPlane, find_binaries  # noqa: E402

BIN = Path(sys.executable).parent


def wait(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except (httpx.HTTPError, KeyError, StopIteration):
            pass
        time.sleep(0.005)
    raise SystemExit(f"timed out waiting for {what}")


class Replica:
    """One `plumb serve` with its Kubernetes side, on free loopback ports."""

    def __init__(self, work: Path, kubeconfig: Path, name: str, lease: str, lease_s: float):
        http, self.grpc = free_port(), f"127.0.0.1:{free_port()}"
        env = {
            **os.environ,
            **serve_env(work),
            "PLUMB_AUTH__KUBECONFIG": str(kubeconfig),
            "PLUMB_REPLICA__NAME": name,
            "PLUMB_KUBERNETES__LEASE_NAME": lease,
            "PLUMB_KUBERNETES__LEASE_DURATION_S": str(lease_s),
            "PLUMB_KUBERNETES__RENEW_DEADLINE_S": str(lease_s * 0.75),
            "PLUMB_KUBERNETES__RETRY_PERIOD_S": str(lease_s / 10),
        }
        self.proc = subprocess.Popen(
            [str(BIN / "plumb"), "serve", "--grpc-listen", self.grpc,
             "--http-listen", f"127.0.0.1:{http}", "--db", f"sqlite:///{work / name}.db"],
            stdout=(work / f"{name}.log").open("w"), stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{http}"
        wait(lambda: httpx.get(self.url + "/readyz").status_code == 200, 120, f"{name} ready")

    def leads(self) -> bool:
        return "plumb_leader 1.0" in httpx.get(self.url + "/metrics").text

    def labels(self, node: str) -> dict[str, str]:
        facts = httpx.get(f"{self.url}/v1/nodes/{node}").json()["facts"]
        return {e["name"]["value"]: e["value"]["value"] for e in facts["cluster"]["labels"]}


def label_latencies(work: Path, plane: ControlPlane, changes: int, procs: list) -> list[float]:
    """Seconds from each label PATCH returning to GET /v1/nodes/{name} showing it."""
    core = client.CoreV1Api(plane.api_client())
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="bench-gpu")))
    agg = Replica(work, plane.kubeconfig, "facts", "facts", 15.0)
    procs.append(agg.proc)
    profile = work / "agent.yaml"
    shutil.copy(PROFILES / "dgx-h100.yaml", profile)
    procs.append(
        subprocess.Popen(
            [str(BIN / "plumb-agent"), "--aggregator", agg.grpc, "--node-name", "bench-gpu",
             "--simulate", str(profile)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    )  # fmt: skip
    core.patch_node("bench-gpu", {"metadata": {"labels": {"nvidia.com/gpu.count": "start"}}})
    wait(lambda: agg.labels("bench-gpu"), 60, "the node's labels in its facts")
    out = []
    for i in range(changes):
        core.patch_node("bench-gpu", {"metadata": {"labels": {"nvidia.com/gpu.count": str(i)}}})
        start = time.perf_counter()
        wait(lambda i=i: agg.labels("bench-gpu").get("nvidia.com/gpu.count") == str(i), 10, "label")
        out.append(time.perf_counter() - start)
    return out


def failover(work: Path, plane: ControlPlane, i: int, lease_s: float, procs: list) -> float:
    """Seconds from SIGKILL of the leader to the other replica's plumb_leader 1."""
    a = Replica(work, plane.kubeconfig, f"a{i}", f"bench-{i}", lease_s)
    wait(a.leads, 60, "a to lead")
    b = Replica(work, plane.kubeconfig, f"b{i}", f"bench-{i}", lease_s)
    procs += [a.proc, b.proc]
    time.sleep(lease_s)  # b has seen a renew for a while
    if b.leads():
        raise SystemExit("two leaders of one Lease")
    a.proc.send_signal(signal.SIGKILL)
    start = time.perf_counter()
    wait(b.leads, lease_s * 5, "b to lead")
    took = time.perf_counter() - start
    b.proc.send_signal(signal.SIGTERM)
    b.proc.wait(timeout=30)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--lease-duration", type=float, default=4.0)
    args = parser.parse_args()
    bin_dir = find_binaries()
    if bin_dir is None:
        raise SystemExit("control plane not built: run scripts/build-k8s-control-plane.sh")
    work = Path(tempfile.mkdtemp(prefix="plumb-k8s-bench-"))
    plane = ControlPlane(workdir=work, bin_dir=bin_dir).start()
    procs: list[subprocess.Popen] = []
    try:
        latencies = label_latencies(work, plane, args.changes, procs)
        failovers = [
            failover(work, plane, i, args.lease_duration, procs) for i in range(args.failovers)
        ]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
        plane.stop()
    result = {
        "bench": "k8s_node_to_facts",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_1m": os.getloadavg()[0],
        },
        "changes": args.changes,
        "label_to_facts_s": {
            "p50": round(statistics.median(latencies), 4),
            "p95": round(statistics.quantiles(latencies, n=20)[-1], 4),
            "max": round(max(latencies), 4),
        },
        "lease_duration_s": args.lease_duration,
        "failover_s": [round(f, 3) for f in failovers],
    }
    out = ROOT / "bench" / "results" / "k8s_node_to_facts.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
