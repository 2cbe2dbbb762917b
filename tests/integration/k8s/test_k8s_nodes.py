"""Node objects into facts: the pure mapping, and the watcher against the real API server."""

from __future__ import annotations

import asyncio
import time

from kubernetes import client

from plumb.aggregator.k8s.nodes import NodeInfo, NodeWatcher, node_info

EKS_NODE = {
    "metadata": {
        "name": "ip-10-0-1-7",
        "labels": {
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": "us-east-1a",
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "kubernetes.io/os": "linux",
        },
    },
    "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
    "status": {
        "nodeInfo": {
            "kubeletVersion": "v1.30.4-eks-a737599",
            "containerRuntimeVersion": "containerd://1.7.20",
            "kernelVersion": "6.1.102-111.182.amzn2023.x86_64",
            "osImage": "Amazon Linux 2023.5.20240819",
            "architecture": "amd64",
            "bootID": "4f1c",
        }
    },
}


def test_node_info_names_facts_like_the_agent_does():
    info = node_info(EKS_NODE)
    assert info.name == "ip-10-0-1-7"
    assert info.facts == {
        "host.kubelet_version": "v1.30.4-eks-a737599",
        "host.container_runtime": "containerd",
        "host.container_runtime_version": "1.7.20",
        "host.kernel": "6.1.102-111.182.amzn2023.x86_64",
        "host.os_pretty_name": "Amazon Linux 2023.5.20240819",
        "host.architecture": "amd64",
        "host.boot_id": "4f1c",
        "host.cloud_provider": "aws",
        "host.instance_type": "p5.48xlarge",
        "host.region": "us-east-1",
        "host.zone": "us-east-1a",
    }
    assert info.gpu_labels == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "feature.node.kubernetes.io/pci-10de.present": "true",
    }


def test_node_info_falls_back_to_beta_labels_and_omits_the_unknown():
    info = node_info(
        {
            "metadata": {
                "name": "old",
                "labels": {
                    "failure-domain.beta.kubernetes.io/zone": "z1",
                    "beta.kubernetes.io/instance-type": "n1-standard-8",
                },
            }
        }
    )
    assert info == NodeInfo(
        name="old", facts={"host.zone": "z1", "host.instance_type": "n1-standard-8"}
    )


async def test_watcher_sees_label_and_kubelet_changes_within_a_second(api, make_node):
    core = client.CoreV1Api(api)
    make_node("watched-gpu", {"nvidia.com/gpu.present": "true"})
    seen: dict[str, NodeInfo] = {}
    deleted: list[str] = []
    changed = asyncio.Event()

    async def on_change(info: NodeInfo) -> None:
        seen[info.name] = info
        changed.set()

    async def on_delete(name: str) -> None:
        deleted.append(name)
        changed.set()

    async def until(check, timeout_s: float = 1.0) -> float:
        start = time.monotonic()
        async with asyncio.timeout(timeout_s):
            while not check():
                changed.clear()
                await changed.wait()
        return time.monotonic() - start

    watcher = NodeWatcher(api, on_change, on_delete, read_timeout_s=2)
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: "watched-gpu" in seen, timeout_s=5)
        assert seen["watched-gpu"].gpu_labels == {"nvidia.com/gpu.present": "true"}

        await asyncio.to_thread(
            core.patch_node, "watched-gpu", {"metadata": {"labels": {"nvidia.com/gpu.count": "8"}}}
        )
        await until(lambda: seen["watched-gpu"].gpu_labels.get("nvidia.com/gpu.count") == "8")

        status = {"status": {"nodeInfo": {"kubeletVersion": "v1.20.9"}}}
        await asyncio.to_thread(core.patch_node_status, "watched-gpu", status)
        await until(lambda: seen["watched-gpu"].facts.get("host.kubelet_version") == "v1.20.9")

        await asyncio.to_thread(core.delete_node, "watched-gpu")
        await until(lambda: "watched-gpu" in deleted)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
