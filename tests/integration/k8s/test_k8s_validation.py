"""Kubernetes checks against the real apiserver: the test plays the kubelet."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from kubernetes import client

from plumb.aggregator.recipes import load_catalog, resolve
from plumb.aggregator.recipes.criteria import Criteria
from plumb.aggregator.validation.kubernetes import Kube, cluster_recipe, run_check

from .conftest import until


def _condition(conditions, kind: str):
    return next((c for c in conditions or () if c.type == kind), None)


CATALOG = load_catalog()
CHECKS = CATALOG.checks.by_id
NS = "plumb-validation"


def check(check_id: str, **over):
    return CHECKS[check_id].model_copy(update=over)


@pytest.fixture(scope="module")
def kube(api: client.ApiClient) -> Kube:
    core = client.CoreV1Api(api)
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    return Kube(api, NS, poll_s=0.1)


def jobs_left(api: client.ApiClient) -> list[str]:
    return [j.metadata.name for j in client.BatchV1Api(api).list_namespaced_job(NS).items]


def play_kubelet(api: client.ApiClient, stop: threading.Event, bound: list[str]) -> None:
    """Every scheduled pod of the GPU Job succeeds, as a kubelet would report it."""
    core = client.CoreV1Api(api)
    while not stop.is_set():
        for pod in core.list_namespaced_pod(NS, label_selector="plumb.dev/check").items:
            if pod.spec.node_name and pod.status.phase == "Pending":
                bound.append(pod.spec.node_name)
                core.patch_namespaced_pod_status(
                    pod.metadata.name,
                    NS,
                    {"status": {"phase": "Succeeded", "conditions": [
                        {"type": "Ready", "status": "False", "reason": "PodCompleted"}
                    ], "containerStatuses": [{
                        "name": "gpu", "image": pod.spec.containers[0].image, "imageID": "",
                        "ready": False, "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                    }]}},
                )  # fmt: skip
        stop.wait(0.05)


def test_gpu_scheduling_passes_when_a_gpu_node_runs_the_job(api, kube, make_node):
    make_node("val-gpu-1", {"nvidia.com/gpu.present": "true"}, gpus=1)
    stop, bound = threading.Event(), []
    kubelet = threading.Thread(target=play_kubelet, args=(api, stop, bound), daemon=True)
    kubelet.start()
    try:
        status, message, details = asyncio.run(run_check(kube, check("gpu-scheduling")))
    finally:
        stop.set()
        kubelet.join()
    assert status == "pass", message
    assert bound and details["node"] == bound[0]
    assert f"ran on {bound[0]} and completed" in message
    until(lambda: not jobs_left(api), what="the Job deleted")


def test_gpu_scheduling_fails_with_the_schedulers_reason_and_cleans_up(api, kube):
    core = client.CoreV1Api(api)
    # No GPU capacity: cordon every node that has some (other tests' nodes included).
    gpu_nodes = [
        n.metadata.name
        for n in core.list_node().items
        if int((n.status.capacity or {}).get("nvidia.com/gpu", "0")) > 0
    ]
    for name in gpu_nodes:
        core.patch_node(name, {"spec": {"unschedulable": True}})
    try:
        status, message, details = asyncio.run(
            run_check(kube, check("gpu-scheduling", timeout_s=3))
        )
    finally:
        for name in gpu_nodes:
            core.patch_node(name, {"spec": {"unschedulable": False}})
    assert status == "fail"
    assert message.startswith(
        "no node could schedule a pod requesting nvidia.com/gpu: 1 within 3 s: 0/"
    ), message
    assert "nodes are available" in message  # the PodScheduled condition's message
    assert "node" not in details
    until(lambda: not jobs_left(api), what="the Job deleted")
    assert details["cleanup"] == "Job and its pods deleted"
    # Deleted by the check itself, not left to the garbage collector: test_k8s_custom_metrics
    # leaves the collector resyncing after an unavailable APIService, as real clusters do.
    until(
        lambda: not core.list_namespaced_pod(NS, label_selector="plumb.dev/check").items,
        what="the Job's pod deleted",
    )


def test_nodes_ready_names_the_gpu_node_that_is_not_ready(api, kube, make_node):
    core = client.CoreV1Api(api)
    make_node("val-gpu-ready", {"nvidia.com/gpu.present": "true"})
    status, message, _ = asyncio.run(run_check(kube, check("nodes-ready")))
    assert status == "pass", message

    make_node("val-gpu-sick", gpus=2)  # GPU capacity, no label: still a GPU node
    sick = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "PLEG"}
    core.patch_node_status("val-gpu-sick", {"status": {"conditions": [sick]}})
    try:
        status, message, details = asyncio.run(run_check(kube, check("nodes-ready")))
        assert status == "fail"
        assert "val-gpu-sick (False: KubeletNotReady PLEG)" in message
        assert details["val-gpu-ready"] == "Ready"
    finally:
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
        core.patch_node_status("val-gpu-sick", {"status": {"conditions": [ready]}})


def test_gpu_health_monitor_wants_a_ready_dcgm_exporter(api, kube, make_node):
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    status, message, _ = asyncio.run(run_check(kube, check("gpu-health-monitor")))
    assert status == "fail" and "no dcgm-exporter or NVSentinel DaemonSet" in message

    selector = {"plumb-test/dcgm": uuid.uuid4().hex[:8]}
    make_node("val-dcgm-node", selector)
    labels = {"app": "nvidia-dcgm-exporter"}
    ds = client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name="nvidia-dcgm-exporter", labels=labels),
        spec=client.V1DaemonSetSpec(
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    node_selector=selector,
                    containers=[client.V1Container(name="dcgm", image="dcgm-exporter")],
                ),
            ),
        ),
    )
    apps.create_namespaced_daemon_set(NS, ds)
    try:
        pod = until(
            lambda: [
                p
                for p in core.list_namespaced_pod(
                    NS, label_selector="app=nvidia-dcgm-exporter"
                ).items
                if p.spec.node_name
            ],
            timeout=30,
            what="the DaemonSet pod scheduled",
        )[0]
        until(
            lambda: (
                apps.read_namespaced_daemon_set(
                    ds.metadata.name, NS
                ).status.desired_number_scheduled
                == 1
            ),
            what="the DaemonSet's desired count",
        )
        status, message, details = asyncio.run(run_check(kube, check("gpu-health-monitor")))
        assert status == "fail", message
        assert f"{NS}/nvidia-dcgm-exporter 0/1 ready" in message

        ready = [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]
        core.patch_namespaced_pod_status(
            pod.metadata.name, NS, {"status": {"phase": "Running", "conditions": ready}}
        )
        until(
            lambda: apps.read_namespaced_daemon_set(ds.metadata.name, NS).status.number_ready == 1,
            timeout=30,
            what="the DaemonSet ready",
        )
        status, message, details = asyncio.run(run_check(kube, check("gpu-health-monitor")))
        assert status == "pass", message
        assert details == {f"{NS}/nvidia-dcgm-exporter": "1/1 ready"}
    finally:
        apps.delete_namespaced_daemon_set(ds.metadata.name, NS, propagation_policy="Background")
        for p in core.list_namespaced_pod(NS, label_selector="app=nvidia-dcgm-exporter").items:
            core.delete_namespaced_pod(p.metadata.name, NS, grace_period_seconds=0)


def play_kubelet_exiting(api: client.ApiClient, stop: threading.Event, exit_code: int) -> None:
    """Every scheduled pod of a check's Job ends with `exit_code` (Succeeded on 0, else Failed)."""
    core = client.CoreV1Api(api)
    phase = "Succeeded" if exit_code == 0 else "Failed"
    while not stop.is_set():
        for pod in core.list_namespaced_pod(NS, label_selector="plumb.dev/check").items:
            if pod.spec.node_name and pod.status.phase == "Pending":
                core.patch_namespaced_pod_status(
                    pod.metadata.name,
                    NS,
                    {"status": {"phase": phase, "containerStatuses": [{
                        "name": "gpu", "image": pod.spec.containers[0].image, "imageID": "",
                        "ready": False, "restartCount": 0,
                        "state": {"terminated": {"exitCode": exit_code, "reason": "Completed"}},
                    }]}},
                )  # fmt: skip
        stop.wait(0.05)


def run_with_kubelet(api, kube, check_id: str, exit_code: int):
    stop = threading.Event()
    kubelet = threading.Thread(
        target=play_kubelet_exiting, args=(api, stop, exit_code), daemon=True
    )
    kubelet.start()
    try:
        return asyncio.run(run_check(kube, check(check_id)))
    finally:
        stop.set()
        kubelet.join()


def test_secure_accelerator_access_runs_a_pod_without_gpus_on_a_gpu_node(api, kube, make_node):
    make_node("val-secure-1", {"nvidia.com/gpu.present": "true"}, gpus=8)
    batch = client.BatchV1Api(api)
    seen: list[client.V1Job] = []

    def watch_jobs(stop: threading.Event) -> None:
        while not stop.is_set() and not seen:
            seen.extend(batch.list_namespaced_job(NS).items)
            stop.wait(0.05)

    stop = threading.Event()
    watcher = threading.Thread(target=watch_jobs, args=(stop,), daemon=True)
    watcher.start()
    try:
        status, message, details = run_with_kubelet(api, kube, "secure-accelerator-access", 0)
    finally:
        stop.set()
        watcher.join()
    assert status == "pass", message
    assert message == f"a pod requesting no nvidia.com/gpu on {details['node']} saw no GPU"
    # The Job asks for no GPU, and is placed on GPU nodes by their label.
    pod = seen[0].spec.template.spec
    assert pod.containers[0].resources.limits is None
    assert pod.node_selector == {"nvidia.com/gpu.present": "true"}
    assert pod.containers[0].command[:2] == ["sh", "-c"]
    until(lambda: not jobs_left(api), what="the Job deleted")

    # The container saw a GPU: its script exited 1, the Job failed.
    status, message, details = run_with_kubelet(api, kube, "secure-accelerator-access", 1)
    assert status == "fail"
    assert message == f"a pod requesting no nvidia.com/gpu on {details['node']} sees GPUs"
    until(lambda: not jobs_left(api), what="the Job deleted")


# This control plane's kube-apiserver (1.20, built with Go 1.19) crashes on any custom resource
# (json-iterator's map encoding), so the ClusterPolicy and DRA objects cannot be served here:
# tests/unit/validation/test_cluster_api_checks.py grades them against a stand-in API. What
# the real server shows is the common case, a cluster without those APIs.
def test_gpu_operator_health_skips_without_the_cluster_policy_api(kube):
    status, message, _ = asyncio.run(run_check(kube, check("gpu-operator-health")))
    assert (status, message) == (
        "skip",
        "no ClusterPolicy API (nvidia.com): the GPU Operator is not installed",
    )


def test_dra_support_skips_where_the_server_has_no_dra_api(kube):
    status, message, _ = asyncio.run(run_check(kube, check("dra-support")))
    assert (status, message) == (
        "skip",
        "the server does not serve resource.k8s.io (DRA needs Kubernetes 1.32+, GA in 1.34)",
    )


def recipe_kube(api: client.ApiClient, **criteria: str) -> Kube:
    """A Kube whose cluster recipe is the catalog's for `criteria` (one node's worth)."""
    recipe = cluster_recipe(CATALOG, [resolve(CATALOG, Criteria(**criteria))])
    return Kube(api, NS, poll_s=0.1, recipe=lambda: recipe)


def test_gang_scheduling_skips_where_the_server_has_no_podgroup_api(api, kube):
    status, message, _ = asyncio.run(run_check(recipe_kube(api), check("gang-scheduling")))
    assert (status, message) == (
        "skip",
        "no PodGroup API (scheduling.run.ai/v2alpha2): kai-scheduler is not installed",
    )
    assert not client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="plumb.dev/check").items


def test_platform_health_skips_a_recipe_without_platform(api, kube):
    status, message, _ = asyncio.run(run_check(recipe_kube(api), check("platform-health")))
    assert (status, message) == ("skip", "the recipe has no platform (recipes.platform is any)")


def test_platform_health_follows_the_trainer_deployment_to_available(api, kube, make_node):
    """The real controllers make the Deployment's pod and the scheduler binds it; the test
    plays the kubelet. CRDs stay unserved here (this apiserver cannot serve them)."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = "kubeflow"  # the kubeflow-trainer component's namespace (recipes/registry.yaml)
    selector = {"plumb-test/trainer": uuid.uuid4().hex[:8]}
    make_node("val-trainer-node", selector)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    labels = {"app": "trainer"}
    apps.create_namespaced_deployment(
        ns,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(
                name="kubeflow-trainer-controller-manager",
                labels={"app.kubernetes.io/instance": "kubeflow-trainer"},
            ),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(
                        node_selector=selector,
                        containers=[client.V1Container(name="manager", image="trainer")],
                    ),
                ),
            ),
        ),
    )
    kubeflow = recipe_kube(api, platform="kubeflow")
    crds = (
        "kubeflow: CRD trainjobs.trainer.kubeflow.org is not served;"
        " kubeflow: CRD trainingruntimes.trainer.kubeflow.org is not served;"
        " kubeflow: CRD clustertrainingruntimes.trainer.kubeflow.org is not served"
    )
    try:
        pod = until(
            lambda: [p for p in core.list_namespaced_pod(ns).items if p.spec.node_name][0],
            timeout=30,
            what="the Deployment's pod bound",
        )
        until(
            lambda: _condition(
                apps.read_namespaced_deployment_status(
                    "kubeflow-trainer-controller-manager", ns
                ).status.conditions,
                "Available",
            ),
            what="the Deployment's Available condition",
        )
        status, message, details = asyncio.run(run_check(kubeflow, check("platform-health")))
        assert status == "fail"
        assert message == (
            "kubeflow: Deployment kubeflow/kubeflow-trainer-controller-manager 0/1 available"
            " (MinimumReplicasUnavailable: Deployment does not have minimum availability.); " + crds
        )
        ready = [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]
        core.patch_namespaced_pod_status(
            pod.metadata.name, ns, {"status": {"phase": "Running", "conditions": ready}}
        )
        until(
            lambda: (
                apps.read_namespaced_deployment_status(
                    "kubeflow-trainer-controller-manager", ns
                ).status.available_replicas
                == 1
            ),
            timeout=30,
            what="the Deployment available",
        )
        status, message, details = asyncio.run(run_check(kubeflow, check("platform-health")))
        assert (status, message) == ("fail", crds)
        assert details["kubeflow/kubeflow-trainer-controller-manager"] == "1/1 available"
    finally:
        core.delete_namespace(ns)
