"""`plumb serve` with its Kubernetes side, against the real API server: Node facts, components,
leader election between two replicas, and the leader's node labels and conditions."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from conftest import Aggregator, scrape
from kubernetes import client

from plumb import facts as wire
from plumb.v1 import agent_pb2, agent_pb2_grpc

from .conftest import cluster_aggregators, until

NAMESPACE = "plumb-serve"
# Fast timings so failover and writes take seconds; the order is what settings require.
FAST = {
    "PLUMB_KUBERNETES__LEASE_DURATION_S": "2",
    "PLUMB_KUBERNETES__RENEW_DEADLINE_S": "1.5",
    "PLUMB_KUBERNETES__RETRY_PERIOD_S": "0.2",
    "PLUMB_KUBERNETES__WRITE_INTERVAL_S": "0.2",
    "PLUMB_KUBERNETES__DISCOVERY_INTERVAL_S": "0.3",
}
LEASE_DURATION_S = 2.0


@pytest.fixture(scope="module")
def namespace(api) -> str:
    core = client.CoreV1Api(api)
    for ns in (NAMESPACE, "gpu-operator"):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    return NAMESPACE


@pytest.fixture
def serve(tmp_path: Path, kubeconfig: Path, namespace: str) -> Iterator[Callable[..., Aggregator]]:
    """Start `plumb serve` replicas on the test cluster: `serve(replica, lease, **env)`."""
    with cluster_aggregators(tmp_path, kubeconfig, namespace, FAST) as start:
        yield start


def fact(agg: Aggregator, node: str, path: str):
    """The value of a dotted fact path in GET /v1/nodes/{node} (`cluster.labels` as a dict)."""
    tree = agg.json(f"/v1/nodes/{node}")["facts"]
    if path == "cluster.labels":
        return {e["name"]["value"]: e["value"]["value"] for e in tree["cluster"]["labels"]}
    for part in path.split("."):
        tree = tree[part]
    return tree["value"]


def leader_gauge(agg: Aggregator) -> float:
    return next(v for name, _, v in scrape(agg) if name == "plumb_leader")


def test_node_labels_and_kubelet_version_reach_the_facts_within_a_second(
    api, make_node, serve, start_agent
):
    core = client.CoreV1Api(api)
    make_node("serve-gpu-1", {"nvidia.com/gpu.present": "true"})
    agg = serve("facts-a", "facts")
    agent = start_agent(agg, "serve-gpu-1", "dgx-h100")
    until(
        lambda: fact(agg, "serve-gpu-1", "cluster.labels") == {"nvidia.com/gpu.present": "true"},
        what="the Node's GPU labels in the node's facts",
    )
    # The simulated agent reports its profile's kubelet; the Node object is the authority.
    assert fact(agg, "serve-gpu-1", "host.kubelet_version") == "v1.33.5-eks-113cf36"

    core.patch_node("serve-gpu-1", {"metadata": {"labels": {"nvidia.com/gpu.count": "8"}}})
    until(
        lambda: fact(agg, "serve-gpu-1", "cluster.labels").get("nvidia.com/gpu.count") == "8",
        timeout=1.0,
        what="a label change in the facts within 1 s",
    )
    status = {
        "status": {
            "nodeInfo": {
                "kubeletVersion": "v1.31.2",
                "containerRuntimeVersion": "cri-o://1.31.0",
                "architecture": "amd64",
            }
        }
    }
    core.patch_node_status("serve-gpu-1", status)
    until(
        lambda: fact(agg, "serve-gpu-1", "host.kubelet_version") == "v1.31.2",
        timeout=1.0,
        what="a kubelet version change in the facts within 1 s",
    )
    assert fact(agg, "serve-gpu-1", "host.container_runtime") == "cri-o"
    # What the agent reads from the host itself stays the agent's.
    assert fact(agg, "serve-gpu-1", "host.architecture") == "x86_64"
    # The agent's deltas still apply to what it reported, not to the overlaid facts.
    agent.edit(lambda spec: spec["driver"].update(version="580.95.05"))
    until(lambda: fact(agg, "serve-gpu-1", "driver.driver_version") == "580.95.05")
    assert fact(agg, "serve-gpu-1", "host.kubelet_version") == "v1.31.2"
    assert not [s for s in scrape(agg) if s[0] == "plumb_ingest_resyncs_total" and s[2]]
    history = agg.json("/v1/nodes/serve-gpu-1/history")
    assert any(
        h["path"] == "host.kubelet_version" and h["new"]["value"] == "v1.31.2" for h in history
    ), history


async def test_a_restarted_aggregator_resumes_a_stream_though_it_stored_the_nodes_labels(
    api, make_node, serve
):
    # What a real agent reports on Kubernetes: nothing of what the Node object overlays.
    own = {
        "driver.driver_version": wire.Reading.ok("580.95.05"),
        "gpus[0].index": wire.Reading.ok(0),
        "gpus[0].name": wire.Reading.ok("NVIDIA H100 80GB HBM3"),
    }
    digest = wire.content_digest(own)
    core = client.CoreV1Api(api)
    make_node("resume-gpu", {"nvidia.com/gpu.present": "true"})
    agg = serve("resume-a", "resume")
    hello = agent_pb2.Hello(node_name="resume-gpu", agent_version="test", boot_id="b-1")
    async with grpc.aio.insecure_channel(agg.grpc) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(agent_pb2.ConnectRequest(hello=hello))
        assert not (await call.read()).welcome.resumed  # no digest: a new agent
        full = agent_pb2.FullFacts(seq=1, content_sha256=digest, facts=wire.unflatten(own))
        await call.write(agent_pb2.ConnectRequest(full_facts=full))
        assert (await call.read()).WhichOneof("message") == "ack"
        until(
            lambda: fact(agg, "resume-gpu", "cluster.labels") == {"nvidia.com/gpu.present": "true"},
            what="the Node's label in the facts the store keeps",
        )
        call.cancel()
    assert agg.stop() == 0
    agg.start()
    # The Node is listed again once a label patched after the restart shows.
    core.patch_node("resume-gpu", {"metadata": {"labels": {"nvidia.com/gpu.count": "8"}}})
    until(
        lambda: fact(agg, "resume-gpu", "cluster.labels").get("nvidia.com/gpu.count") == "8",
        what="the restarted aggregator's Node overlay",
    )
    async with grpc.aio.insecure_channel(agg.grpc) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        hello.content_sha256 = digest
        await call.write(agent_pb2.ConnectRequest(hello=hello))
        assert (await call.read()).welcome.resumed
        until(lambda: agg.node("resume-gpu")["connected"], what="the resumed node connected")
        call.cancel()
    assert ("plumb_ingest_streams_resumed_total", {}, 1.0) in scrape(agg)
    assert fact(agg, "resume-gpu", "driver.driver_version") == "580.95.05"


def test_killing_the_leader_hands_the_lease_over_within_its_duration(api, serve, start_agent):
    a = serve("replica-a", "failover")
    until(lambda: a.json("/readyz")["replica"]["leader"], what="replica-a to lead")
    b = serve("replica-b", "failover")
    coordination = client.CoordinationV1Api(api)
    for _ in range(10):  # b sees a live holder round after round and stays a follower
        time.sleep(0.2)
        assert leader_gauge(a) == 1.0 and leader_gauge(b) == 0.0
    assert b.json("/readyz")["replica"] == {
        "kubernetes": True,
        "leader": False,
        "identity": "replica-b",
    }
    assert coordination.read_namespaced_lease("failover", NAMESPACE).spec.holder_identity == (
        "replica-a"
    )
    # The follower leaves validation Jobs to the leader.
    start_agent(b, "failover-gpu", "dgx-h100")
    until(lambda: b.node("failover-gpu"), what="a node on the follower")
    run = b.post("/v1/validations", json={"checks": ["gpu-scheduling"]})
    assert run.status_code == 202, run.text
    result = until(
        lambda: (r := b.json(f"/v1/validations/{run.json()['id']}"))["state"] == "finished" and r,
        what="the follower's validation run",
    )["results"][0]
    assert result["status"] == "skip" and "another replica" in result["message"], result

    a.stop(signal.SIGKILL)  # a crashed pod: no release, b waits the lease out
    killed = time.monotonic()
    until(lambda: leader_gauge(b) == 1.0, timeout=LEASE_DURATION_S * 3, what="b to lead")
    took = time.monotonic() - killed
    # b takes over once the record stood still for a lease duration (plus a retry round).
    assert took < LEASE_DURATION_S + 1.0, took
    lease = coordination.read_namespaced_lease("failover", NAMESPACE)
    assert lease.spec.holder_identity == "replica-b"
    assert lease.spec.lease_transitions == 1


def owned(node: client.V1Node) -> list[str]:
    return json.loads((node.metadata.annotations or {}).get("plumb.dev/owned-labels", "[]"))


def conditions(node: client.V1Node) -> dict[str, client.V1NodeCondition]:
    return {c.type: c for c in node.status.conditions or ()}


def daemonset(name: str, image: str) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "gpu-operator"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"plumb.test/none": "true"},  # no pods: images are enough
                    "containers": [{"name": name, "image": image}],
                },
            },
        },
    }


def test_the_leader_labels_nodes_prunes_what_it_owned_and_reports_drift_and_agent_state(
    api, make_node, serve, start_agent
):
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    make_node("marked-gpu", {"nvidia.com/gpu.present": "true", "plumb.dev/retired": "x"})
    # A former version of Plumb owned plumb.dev/retired; nvidia.com/* is never Plumb's.
    core.patch_node(
        "marked-gpu",
        {
            "metadata": {
                "annotations": {
                    "plumb.dev/owned-labels": '["plumb.dev/retired", "nvidia.com/gpu.present"]'
                }
            }
        },
    )
    agg = serve("writer", "writer", PLUMB_KUBERNETES__WRITE_NODES="true")
    agent = start_agent(agg, "marked-gpu", "dgx-h100")

    def marked(drift: str, drifting: str):
        node = core.read_node("marked-gpu")
        labels = node.metadata.labels
        cond = conditions(node)
        return (
            labels.get("plumb.dev/drift") == drift
            and cond.get("GpuStackDrift")
            and cond["GpuStackDrift"].status == drifting
            and node
        )

    node = until(lambda: marked("none", "False"), what="labels and a clean GpuStackDrift")
    labels = node.metadata.labels
    assert labels["plumb.dev/recipe"] == "eks.h100.ubuntu.any.any"
    assert "plumb.dev/retired" not in labels
    assert labels["nvidia.com/gpu.present"] == "true"
    assert owned(node) == ["plumb.dev/drift", "plumb.dev/recipe"]
    assert conditions(node)["PlumbAgentDown"].status == "False"
    clean_since = conditions(node)["GpuStackDrift"].last_transition_time

    # A device plugin older than the recipe's: discovered from its image, drift opens.
    apps.create_namespaced_daemon_set(
        "gpu-operator",
        daemonset("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    )
    until(
        lambda: fact(agg, "marked-gpu", "cluster.components.device_plugin.version") == "v0.17.0",
        what="the device plugin's version in the facts",
    )
    finding = until(
        lambda: next(
            f for f in agg.json("/v1/drift", node="marked-gpu") if f["component"] == "device-plugin"
        ),
        what="a device-plugin drift finding",
    )
    assert (finding["kind"], finding["expected"], finding["observed"]) == (
        "recipe",
        "v0.20.0",
        "v0.17.0",
    )
    node = until(lambda: marked("warning", "True"), what="GpuStackDrift True")
    drift = conditions(node)["GpuStackDrift"]
    assert drift.reason == "DriftOpen" and "device-plugin" in drift.message
    assert drift.last_transition_time >= clean_since  # whole seconds: may be the same one

    # Rolled to the recipe's version: the finding closes and the condition clears.
    apps.patch_namespaced_daemon_set(
        "nvidia-device-plugin",
        "gpu-operator",
        {"spec": {"template": {"spec": {"containers": [
            {"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}
        ]}}}},
    )  # fmt: skip
    until(lambda: marked("none", "False"), what="GpuStackDrift False again")

    # The agent's stream ends: PlumbAgentDown appears, and clears when it reconnects.
    agent.proc.send_signal(signal.SIGTERM)
    agent.proc.wait(timeout=15)
    node = until(
        lambda: (
            (n := core.read_node("marked-gpu"))
            and conditions(n)["PlumbAgentDown"].status == "True"
            and n
        ),
        what="PlumbAgentDown True",
    )
    assert conditions(node)["PlumbAgentDown"].reason == "AgentDisconnected"
    start_agent(agg, "marked-gpu", "dgx-h100")
    until(
        lambda: conditions(core.read_node("marked-gpu"))["PlumbAgentDown"].status == "False",
        what="PlumbAgentDown cleared on reconnect",
    )
    assert core.read_node("marked-gpu").metadata.labels["nvidia.com/gpu.present"] == "true"
