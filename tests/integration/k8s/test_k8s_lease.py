"""Leader election on a real coordination.k8s.io/v1 Lease: one leader, handover on death."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from timeouts import scaled

from plumb.aggregator.k8s.lease import LeaderElector, LeaseTiming

NAMESPACE = "lease-test"
FAST = LeaseTiming(lease_duration_s=2.0, renew_deadline_s=1.5, retry_period_s=0.2)

# A replica in its own process, so the test can SIGKILL it like a crashed pod.
REPLICA = """
import asyncio, sys
from kubernetes import config
from plumb.aggregator.k8s.lease import LeaderElector, LeaseTiming

async def main():
    api = config.new_client_from_config(config_file=sys.argv[1])
    elector = LeaderElector(api, sys.argv[2], sys.argv[3], sys.argv[4],
                            LeaseTiming(lease_duration_s=2.0, renew_deadline_s=1.5,
                                        retry_period_s=0.2))
    task = asyncio.create_task(elector.run())
    await elector.is_leader.wait()
    print("leader", flush=True)
    await task

asyncio.run(main())
"""


@pytest.fixture
def replica_process(control_plane, namespace) -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(lease: str, identity: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                REPLICA,
                str(control_plane.kubeconfig),
                namespace,
                lease,
                identity,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def wait_leader(elector: LeaderElector, timeout_s: float) -> float:
    """Seconds until `elector` leads; fails the test at the deadline."""
    start = time.monotonic()
    async with asyncio.timeout(timeout_s):
        await elector.is_leader.wait()
    return time.monotonic() - start


async def test_one_of_two_replicas_leads(api, namespace):
    a = LeaderElector(api, namespace, "one-leader", "replica-a", FAST)
    b = LeaderElector(api, namespace, "one-leader", "replica-b", FAST)
    task_a = asyncio.create_task(a.run())
    await wait_leader(a, scaled(5))
    task_b = asyncio.create_task(b.run())
    try:
        # b sees a live holder for several rounds and stays a follower.
        for _ in range(10):
            await asyncio.sleep(FAST.retry_period_s)
            assert a.is_leader.is_set() and not b.is_leader.is_set()
        assert await asyncio.to_thread(b.holder) == "replica-a"
    finally:
        task_a.cancel()
        task_b.cancel()
        await asyncio.gather(task_a, task_b, return_exceptions=True)


async def test_a_clean_shutdown_hands_the_lease_over_at_once(api, namespace):
    a = LeaderElector(api, namespace, "clean-handover", "replica-a", FAST)
    b = LeaderElector(api, namespace, "clean-handover", "replica-b", FAST)
    task_a = asyncio.create_task(a.run())
    await wait_leader(a, scaled(5))
    task_b = asyncio.create_task(b.run())
    try:
        await asyncio.sleep(FAST.retry_period_s * 3)
        task_a.cancel()
        await asyncio.gather(task_a, return_exceptions=True)
        # Released: no need to wait out the lease duration.
        took = await wait_leader(b, FAST.lease_duration_s)
        assert took < FAST.lease_duration_s
        assert await asyncio.to_thread(b.holder) == "replica-b"
    finally:
        task_b.cancel()
        await asyncio.gather(task_b, return_exceptions=True)


async def test_killing_the_leader_hands_the_lease_over(api, namespace, replica_process):
    leader = replica_process("killed-leader", "replica-a")
    line = await asyncio.wait_for(asyncio.to_thread(leader.stdout.readline), timeout=scaled(20))
    assert line.strip() == "leader", line
    b = LeaderElector(api, namespace, "killed-leader", "replica-b", FAST)
    task_b = asyncio.create_task(b.run())
    try:
        await asyncio.sleep(FAST.retry_period_s * 3)
        assert not b.is_leader.is_set()
        leader.send_signal(signal.SIGKILL)  # no release: b must wait the lease out
        await wait_leader(b, FAST.lease_duration_s * 3)
        assert await asyncio.to_thread(b.holder) == "replica-b"
    finally:
        task_b.cancel()
        await asyncio.gather(task_b, return_exceptions=True)
