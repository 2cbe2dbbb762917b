"""The chart applied to a real 1.20 API server: the agent lands on GPU nodes only, and its
Service reaches an aggregator pod that is not ready yet."""

from __future__ import annotations

from kubernetes import client

from .conftest import until

AGENT_SELECTOR = "app.kubernetes.io/component=agent,app.kubernetes.io/instance=plumb"


def test_chart_applies_and_the_agent_lands_on_gpu_nodes_only(api, make_node, plumb_release):
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    make_node("gpu-a", {"nvidia.com/gpu.present": "true"}, gpus=8)
    make_node(
        "gpu-b",
        {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true"},
        gpus=8,
    )
    make_node("nfd-only", {"feature.node.kubernetes.io/pci-10de.present": "true"})
    make_node("opted-in", {"plumb.dev/agent": "true"})
    make_node("cpu-a", {"node-role.example.com/cpu": "true"})
    make_node("gpu-false", {"nvidia.com/gpu.present": "false"})
    # GPU nodes are tainted in real clusters; the agent tolerates it.
    core.patch_node(
        "gpu-a", {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}
    )
    expected = {"gpu-a", "gpu-b", "nfd-only", "opted-in"}

    def placed() -> set[str] | None:
        pods = core.list_namespaced_pod(plumb_release.namespace, label_selector=AGENT_SELECTOR)
        nodes = {p.spec.node_name for p in pods.items}
        return nodes if len(pods.items) == len(expected) and None not in nodes else None

    assert until(placed, timeout=30, what="agent pods scheduled") == expected
    ds = apps.read_namespaced_daemon_set("plumb-agent", plumb_release.namespace)
    assert ds.status.desired_number_scheduled == len(expected)

    pod = core.list_namespaced_pod(plumb_release.namespace, label_selector=AGENT_SELECTOR).items[0]
    assert pod.spec.automount_service_account_token is False
    assert not any(
        k.startswith("nvidia.com/")
        for c in pod.spec.containers
        for k in (c.resources.requests or {}) | (c.resources.limits or {})
    )


def test_aggregator_deployment_and_service_are_served(api, plumb_release):
    apps = client.AppsV1Api(api)
    core = client.CoreV1Api(api)
    deployment = apps.read_namespaced_deployment("plumb-aggregator", plumb_release.namespace)
    assert deployment.spec.template.spec.service_account_name == "plumb-aggregator"
    service = core.read_namespaced_service("plumb-aggregator", plumb_release.namespace)
    assert {p.port for p in service.spec.ports} == {7443, 8080}
    # The ReplicaSet controller turns the Deployment into a pod the scheduler binds.
    until(
        lambda: [
            p
            for p in core.list_namespaced_pod(
                plumb_release.namespace, label_selector="app.kubernetes.io/component=aggregator"
            ).items
            if p.spec.node_name
        ],
        timeout=30,
        what="aggregator pod bound",
    )


def test_no_pdb_on_an_api_server_without_policy_v1(plumb_release):
    # 1.20 serves policy/v1beta1 only; the chart leaves the PDB out rather than fail.
    kinds = {o["kind"] for o in plumb_release.objects}
    assert "PodDisruptionBudget" not in kinds


def test_agents_reach_an_aggregator_pod_before_it_is_ready(api, make_node, plumb_release):
    # After a restart the aggregator's gRPC port holds streams at once, while /readyz waits
    # for every stored node to be evaluated. The controller manager's Endpoints are what
    # kube-proxy routes by: the agents' Service lists the unready pod, the main one does not.
    core = client.CoreV1Api(api)
    ns = plumb_release.namespace
    make_node("endpoints-cpu", {"node-role.example.com/cpu": "true"})
    pod = until(
        lambda: next(
            (
                p
                for p in core.list_namespaced_pod(
                    ns, label_selector="app.kubernetes.io/component=aggregator"
                ).items
                if p.spec.node_name
            ),
            None,
        ),
        timeout=30,
        what="aggregator pod bound",
    )

    def kubelet_reports(ready: bool) -> None:
        core.patch_namespaced_pod_status(
            pod.metadata.name,
            ns,
            {"status": {"phase": "Running", "podIP": "10.9.0.7", "conditions": [
                {"type": "Ready", "status": str(ready)}
            ]}},
        )  # fmt: skip

    def addresses(service: str) -> tuple[list[str], list[str]]:
        subsets = core.read_namespaced_endpoints(service, ns).subsets or []
        return (
            [a.ip for s in subsets for a in s.addresses or []],
            [a.ip for s in subsets for a in s.not_ready_addresses or []],
        )

    kubelet_reports(ready=False)
    assert until(
        lambda: addresses("plumb-aggregator") == ([], ["10.9.0.7"]) or None,
        timeout=30,
        what="the main Service to hold the pod as not ready",
    )
    assert addresses("plumb-aggregator-agents") == (["10.9.0.7"], [])
    kubelet_reports(ready=True)
    until(
        lambda: addresses("plumb-aggregator") == (["10.9.0.7"], []) or None,
        timeout=30,
        what="the main Service to route to the ready pod",
    )
    assert addresses("plumb-aggregator-agents") == (["10.9.0.7"], [])
