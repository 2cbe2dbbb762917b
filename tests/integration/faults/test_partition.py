"""An agent partitioned from the aggregator by a network namespace: the node goes
disconnected after the idle timeout and recovers when the link comes back.

The test makes two namespaces of its own joined by one veth pair with a /30 inside them:
the aggregator listens in one, the agent runs in the other, and the partition is the agent's
end of the link going down. No traffic leaves those two namespaces. The test's HTTP requests
run in a thread that has joined the aggregator's namespace (setns).

Not covered: the `PlumbAgentDown` node condition, which needs the Kubernetes node writer.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

BIN = Path(sys.executable).parent
PROFILES = Path(__file__).resolve().parents[3] / "agent" / "simulate" / "profiles"
CLONE_NEWNET = 0x40000000
# Link-local test hosts: the two ends of the test's own veth pair, in its own namespaces.
AGG_IP, AGENT_IP = "10.213.7.1", "10.213.7.2"
IDLE_TIMEOUT_S = 3.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    if shutil.which("ip") is None:
        pytest.skip("iproute2's `ip` is not installed")
    tag = f"{os.getpid() % 100000}"
    agg_ns, agent_ns = f"plumb-agg-{tag}", f"plumb-agent-{tag}"
    veth_a, veth_b = f"pa{tag}", f"pb{tag}"
    try:
        _ip("netns", "add", agg_ns)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"`ip netns add` is not permitted here: {exc.stderr.strip()}")
    try:
        _ip("netns", "add", agent_ns)
        _ip("link", "add", veth_a, "type", "veth", "peer", "name", veth_b)
        _ip("link", "set", veth_a, "netns", agg_ns)
        _ip("link", "set", veth_b, "netns", agent_ns)
        _ip("-n", agg_ns, "addr", "add", f"{AGG_IP}/30", "dev", veth_a)
        _ip("-n", agent_ns, "addr", "add", f"{AGENT_IP}/30", "dev", veth_b)
        for ns, dev in ((agg_ns, veth_a), (agent_ns, veth_b)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", dev, "up")
        yield agg_ns, agent_ns
    finally:
        for ns in (agent_ns, agg_ns):  # deleting a namespace deletes its end of the veth
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def _in_netns(ns: str, fn: Callable[[], object]) -> object:
    """Runs `fn` in a thread that has joined network namespace `ns`; returns its result."""
    out: dict[str, object] = {}

    def target() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                out["error"] = OSError(ctypes.get_errno(), "setns failed")
                return
        finally:
            os.close(fd)
        try:
            out["value"] = fn()
        except Exception as exc:  # re-raised in the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out.get("value")


def _node(ns: str, name: str) -> dict | None:
    def get() -> list[dict]:
        return httpx.get("http://127.0.0.1:8080/v1/nodes", timeout=5).json()

    try:
        nodes = _in_netns(ns, get)
    except httpx.HTTPError:
        return None
    return next((n for n in nodes if n["name"] == name), None)  # type: ignore[union-attr]


def _wait(check: Callable[[], object], timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def _spawn(ns: str, log: Path, *cmd: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    # `ip netns exec` execs the command: the PID is the command's own.
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, *cmd],
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def test_a_partitioned_agent_goes_disconnected_and_recovers(tmp_path, namespaces):
    agg_ns, agent_ns = namespaces
    veth_b = f"pb{os.getpid() % 100000}"
    profile = tmp_path / "part-1.yaml"
    shutil.copy(PROFILES / "l4.yaml", profile)
    procs = [
        _spawn(
            agg_ns,
            tmp_path / "aggregator.log",
            # The agent is in another network namespace: unauthenticated, off loopback.
            str(BIN / "plumb"), "serve", "--insecure-agents", "--grpc-listen", f"{AGG_IP}:7443",
            "--http-listen", "127.0.0.1:8080", "--db", f"sqlite:///{tmp_path / 'plumb.db'}",
            env={
                "PLUMB_INGEST__IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
                "PLUMB_INGEST__HEARTBEAT_INTERVAL_S": "1",
                "PLUMB_API__ANONYMOUS_READ": "true",
            },
        ),
        _spawn(
            agent_ns,
            tmp_path / "agent.log",
            str(BIN / "plumb-agent"), "--aggregator", f"{AGG_IP}:7443", "--node-name", "part-1",
            "--simulate", str(profile), "--poll-interval", "0.2", "--heartbeat-interval", "1",
        ),
    ]  # fmt: skip
    try:
        _wait(lambda: (_node(agg_ns, "part-1") or {}).get("connected"), 60, "agent connected")

        _ip("-n", agent_ns, "link", "set", veth_b, "down")  # the partition
        took = _wait(
            lambda: _node(agg_ns, "part-1")["connected"] is False,  # type: ignore[index]
            IDLE_TIMEOUT_S + 10,
            "node disconnected by the idle timeout",
        )
        assert took >= IDLE_TIMEOUT_S - 1.5  # the idle timeout, not an early close

        spec = yaml.safe_load(profile.read_text())  # a change made while partitioned
        spec["driver"]["version"] = "999.1.2"
        profile.write_text(yaml.safe_dump(spec, sort_keys=False))

        _ip("-n", agent_ns, "link", "set", veth_b, "up")  # healed
        _wait(
            lambda: (
                (_node(agg_ns, "part-1") or {}).get("connected")
                and _node(agg_ns, "part-1")["driver_version"] == "999.1.2"
            ),  # type: ignore[index]
            60,
            "node reconnected with the change made while partitioned",
        )
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
