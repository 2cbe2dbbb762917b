"""gpu-operator-health and dra-support graded against a stand-in Kubernetes API on loopback.

The integration control plane's kube-apiserver cannot serve custom resources (it crashes on
them), so the ClusterPolicy, DeviceClass and ResourceSlice objects come from this stand-in: a
real HTTP server answering the paths the checks read, in the shapes of the Kubernetes API
(discovery, lists). The checks use the real `kubernetes` client against it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.validation.kubernetes import Kube, run_check

CHECKS = load_catalog().checks.by_id


def group(name: str, version: str) -> dict:
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


def node(name: str, gpus: int) -> dict:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"capacity": {"nvidia.com/gpu": str(gpus)}},
    }


def deployment(available: int) -> dict:
    return {
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator",
                     "labels": {"app": "gpu-operator"}},
        "spec": {"selector": {"matchLabels": {"app": "gpu-operator"}},
                 "template": {"spec": {"containers": [{"name": "gpu-operator"}]}}},
        "status": {"availableReplicas": available},
    }  # fmt: skip


def resource_slice(node: str, devices: int) -> dict:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                 "devices": [{"name": f"gpu-{i}"} for i in range(devices)]},
    }  # fmt: skip


class StandIn:
    """Paths to the JSON bodies they answer; anything else is a 404 Status."""

    def __init__(self) -> None:
        self.groups: list[dict] = []
        self.lists: dict[str, list[dict]] = {"/api/v1/nodes": [], "/apis/apps/v1/deployments": []}

    def answer(self, path: str) -> dict | None:
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": self.groups}
        if path in self.lists:
            return {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": self.lists[path]}
        return None


@pytest.fixture
def api() -> Iterator[tuple[StandIn, Kube]]:
    stand_in = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            body = stand_in.answer(self.path.split("?")[0].rstrip("/"))
            status = 200 if body is not None else 404
            if body is None:
                body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield stand_in, Kube(client.ApiClient(config), "plumb-validation", poll_s=0.05)
    finally:
        server.shutdown()
        thread.join()


def run(kube: Kube, check_id: str):
    return asyncio.run(run_check(kube, CHECKS[check_id]))


def test_gpu_operator_health_names_the_operand_that_is_not_ready(api) -> None:
    stand_in, kube = api
    stand_in.groups = [group("nvidia.com", "v1")]
    stand_in.lists["/apis/apps/v1/deployments"] = [deployment(available=0)]
    stand_in.lists["/apis/nvidia.com/v1/clusterpolicies"] = [{
        "metadata": {"name": "cluster-policy"},
        "status": {"state": "notReady", "conditions": [
            {"type": "Ready", "status": "False", "reason": "OperandNotReady"},
            {"type": "Error", "status": "True", "reason": "DriverNotReady",
             "message": "nvidia-driver-daemonset is not ready"}]},
    }]  # fmt: skip
    status, message, details = run(kube, "gpu-operator-health")
    assert status == "fail"
    assert message == (
        "Deployment gpu-operator/gpu-operator has no available replica; ClusterPolicy"
        " cluster-policy is notReady (Error: DriverNotReady nvidia-driver-daemonset is not ready)"
    )
    assert details == {
        "gpu-operator/gpu-operator": "0 available",
        "clusterpolicy/cluster-policy": "notReady",
    }


def test_gpu_operator_health_passes_with_the_operator_up_and_the_policy_ready(api) -> None:
    stand_in, kube = api
    stand_in.groups = [group("nvidia.com", "v1")]
    stand_in.lists["/apis/apps/v1/deployments"] = [deployment(available=1)]
    stand_in.lists["/apis/nvidia.com/v1/clusterpolicies"] = [
        {"metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}}
    ]
    status, message, _ = run(kube, "gpu-operator-health")
    assert (status, message) == (
        "pass",
        "gpu-operator/gpu-operator, clusterpolicy/cluster-policy: operator available,"
        " ClusterPolicy ready",
    )


def test_gpu_operator_health_fails_with_the_api_but_no_policy_or_operator(api) -> None:
    stand_in, kube = api
    stand_in.groups = [group("nvidia.com", "v1")]
    stand_in.lists["/apis/nvidia.com/v1/clusterpolicies"] = []
    status, message, _ = run(kube, "gpu-operator-health")
    assert status == "fail"
    assert message == (
        "no gpu-operator Deployment in any namespace; no ClusterPolicy: the operator deploys"
        " no operand"
    )


def test_dra_support_names_the_gpu_node_without_devices(api) -> None:
    stand_in, kube = api
    stand_in.groups = [group("resource.k8s.io", "v1")]
    stand_in.lists["/api/v1/nodes"] = [node("gpu-a", 8), node("gpu-b", 8), node("gpu-c", 8)]
    stand_in.lists["/apis/resource.k8s.io/v1/deviceclasses"] = [
        {"metadata": {"name": "gpu.nvidia.com"}}
    ]
    stand_in.lists["/apis/resource.k8s.io/v1/resourceslices"] = [
        resource_slice("gpu-a", 8),
        resource_slice("gpu-b", 8),
        # Another driver's slice on gpu-c does not count for GPUs.
        {"metadata": {"name": "c-net"}, "spec": {"driver": "net.example.com",
                                                 "nodeName": "gpu-c", "devices": [{"name": "n"}]}},
    ]  # fmt: skip
    status, message, details = run(kube, "dra-support")
    assert status == "fail"
    assert message == "1 of 3 GPU nodes publish no gpu.nvidia.com device: gpu-c"
    assert details == {
        "api": "resource.k8s.io/v1",
        "gpu-a": "8 devices",
        "gpu-b": "8 devices",
        "gpu-c": "0 devices",
    }


def test_dra_support_skips_where_no_gpu_dra_driver_is_installed(api) -> None:
    stand_in, kube = api
    stand_in.groups = [group("resource.k8s.io", "v1")]
    stand_in.lists["/apis/resource.k8s.io/v1/deviceclasses"] = [
        {"metadata": {"name": "mig.example.com"}}
    ]
    status, message, _ = run(kube, "dra-support")
    assert (status, message) == (
        "skip",
        "no DeviceClass gpu.nvidia.com: the GPU DRA driver is not installed",
    )
