"""The two-node NCCL checks on the real apiserver: the Secret, Service and two Jobs are created,
the scheduler places the pods on the two chosen nodes, the test plays the kubelet, the log (a
real nccl-tests capture: this control plane has no kubelet to serve logs) is graded, and
everything is deleted, on success and on timeout."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from kubernetes import client

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.recipes.check_catalog import Minimum
from plumb.aggregator.validation.kubernetes import Kube, run_check
from plumb.aggregator.validation.nccl_pair import RunNodes, nccl_pair
from plumb.facts import Reading

from .conftest import until

NAMESPACE = "plumb-nccl"
CATALOG = load_catalog()
NET = CATALOG.checks.by_id["nccl-allreduce-net"]
NVLS = CATALOG.checks.by_id["nccl-allreduce-nvls"]
# 2 nodes x 2 L40S, NCCL 2.27.3: busbw 9.63 GB/s at 8589934592 B (copied from
# shared/real-captures/nccl-tests/schmaustech_l40s_2x2.txt).
LOG = (Path(__file__).parents[2] / "data/real/nccl-tests/schmaustech_l40s_2x2.txt").read_text()
PAIR = "plumb.dev/nccl-pair"


def l40s(gpus: int = 2) -> dict[str, Reading]:
    out = {"driver.fabric_manager_version": Reading.not_supported()}
    for i in range(gpus):
        out |= {
            f"gpus[{i}].index": Reading.ok(i),
            f"gpus[{i}].name": Reading.ok("NVIDIA L40S"),
            f"gpus[{i}].pci_device_id": Reading.ok("0x26b9"),
            f"gpus[{i}].nvlink_links_total": Reading.ok(0),
        }
    return out


@pytest.fixture(scope="module")
def kube(api: client.ApiClient, namespace: str, make_node) -> Kube:
    make_node("nccl-b", {"nvidia.com/gpu.present": "true"}, gpus=2)
    make_node("nccl-a", {"nvidia.com/gpu.present": "true"}, gpus=2)
    return Kube(api, namespace, poll_s=0.1)


NODES = RunNodes(CATALOG, {"nccl-a": l40s(), "nccl-b": l40s()})


def graded(value: float, **over):
    row = Minimum(model="L40S", fabric="pcie", gpus=2, value=value, unit="GB/s", source="test")
    return NET.model_copy(update={"minima": (row,), **over})


def left(api: client.ApiClient, ns: str) -> dict[str, list[str]]:
    """What the check leaves behind, by kind."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    return {
        "jobs": [j.metadata.name for j in batch.list_namespaced_job(ns, label_selector=PAIR).items],
        "services": [
            s.metadata.name for s in core.list_namespaced_service(ns, label_selector=PAIR).items
        ],
        "secrets": [
            s.metadata.name for s in core.list_namespaced_secret(ns, label_selector=PAIR).items
        ],
    }


def play_kubelet(api, ns, stop: threading.Event, seen: dict[str, object]) -> None:
    """Every scheduled pod of the pair succeeds; every object the run created is noted on the
    way, by kind, as a poll may land between the deletes of the launcher's and worker's Jobs."""
    core = client.CoreV1Api(api)
    while not stop.is_set():
        pods = core.list_namespaced_pod(ns, label_selector=PAIR).items
        for kind, names in left(api, ns).items():
            seen.setdefault(kind, set()).update(names)
        for pod in pods:
            if pod.spec.node_name and pod.status.phase == "Pending":
                seen[pod.metadata.labels["plumb.dev/role"]] = pod.spec.node_name
                core.patch_namespaced_pod_status(
                    pod.metadata.name,
                    ns,
                    {"status": {"phase": "Succeeded", "containerStatuses": [{
                        "name": "nccl", "image": pod.spec.containers[0].image, "imageID": "",
                        "ready": False, "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                    }]}},
                )  # fmt: skip
        stop.wait(0.05)


def test_the_pair_runs_on_the_two_chosen_nodes_is_graded_and_deleted(api, kube, namespace):
    asked: list[tuple[str, str]] = []

    async def read_log(ns: str, pod: str) -> str:
        asked.append((ns, pod))
        return LOG

    seen: dict[str, object] = {}
    stop = threading.Event()
    kubelet = threading.Thread(target=play_kubelet, args=(api, namespace, stop, seen))
    kubelet.start()
    try:
        status, message, details = asyncio.run(
            nccl_pair(kube, graded(9.5), NODES, read_log=read_log)
        )
    finally:
        stop.set()
        kubelet.join()
    assert status == "pass", message
    assert message == (
        "9.63 GB/s bus bandwidth at 8589934592 B across nccl-a, nccl-b,"
        " minimum 9.5 for L40S on pcie"
    )
    # The scheduler honoured the pinning: launcher on the first node, worker on the second.
    assert (seen["launcher"], seen["worker"]) == ("nccl-a", "nccl-b")
    assert (details["launcher_node"], details["worker_node"]) == ("nccl-a", "nccl-b")
    [name] = seen["services"]
    assert seen["secrets"] == {name}
    assert seen["jobs"] == {f"{name}-launcher", f"{name}-worker"}
    assert asked[0][0] == namespace and asked[0][1].startswith(f"{name}-launcher-")
    assert details["group"] == "L40S x2, pcie" and details["nccl_version"] == "2.27.3+cuda12.9"
    until(lambda: left(api, namespace) == {"jobs": [], "services": [], "secrets": []},
          what="the pair's objects deleted")  # fmt: skip

    # The same run under a minimum it does not reach fails, and cleans up the same way.
    kubelet = threading.Thread(
        target=play_kubelet, args=(api, namespace, stop := threading.Event(), {})
    )
    kubelet.start()
    try:
        status, message, _ = asyncio.run(nccl_pair(kube, graded(12), NODES, read_log=read_log))
    finally:
        stop.set()
        kubelet.join()
    assert status == "fail"
    assert message.endswith("below the minimum 12 for L40S on pcie")
    until(lambda: left(api, namespace) == {"jobs": [], "services": [], "secrets": []},
          what="the pair's objects deleted")  # fmt: skip


def test_a_pair_that_never_finishes_fails_at_its_timeout_and_is_deleted(api, kube, namespace):
    async def read_log(ns: str, pod: str) -> str:
        raise client.ApiException(status=400, reason="Bad Request")  # no kubelet: no log

    status, message, details = asyncio.run(
        nccl_pair(kube, graded(9.5, timeout_s=2), NODES, read_log=read_log)
    )
    assert (status, message) == ("fail", "the all-reduce did not finish within 2 s")
    assert details["log"] == "not readable: 400 Bad Request"
    assert details["cleanup"] == "Jobs and their pods, Service and Secret deleted"
    until(lambda: left(api, namespace) == {"jobs": [], "services": [], "secrets": []},
          what="the pair's objects deleted")  # fmt: skip


def test_run_check_skips_nvls_without_an_nvswitch_fabric_and_creates_nothing(api, kube, namespace):
    status, message, _ = asyncio.run(run_check(kube, NVLS, NODES))
    assert status == "skip"
    assert message == (
        "no node of the run has an NVLS fabric (fabric nvswitch on hopper or blackwell GPUs): "
        "nccl-a (L40S, ada, pcie); nccl-b (L40S, ada, pcie)"
    )
    assert left(api, namespace) == {"jobs": [], "services": [], "secrets": []}
