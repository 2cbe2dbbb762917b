"""Kubernetes checks: cluster-wide, against the API server, once per run (node "(cluster)").

`gpu-scheduling` creates a batch/v1 Job requesting one GPU in the validation namespace and
waits, within the check's timeout, for its pod to be scheduled and the Job to complete; the
Job is always deleted (propagation Background), even on failure or cancellation.
`gpu-health-monitor` looks for a dcgm-exporter or NVSentinel DaemonSet that is fully ready;
`nodes-ready` wants every GPU node Ready. `secure-accelerator-access` runs a Job that requests
no GPU on a GPU node and wants it to see none; `gpu-operator-health` reads the ClusterPolicy's
state and the operator Deployment; `dra-support` wants the resource.k8s.io API, the GPU
DeviceClass and ResourceSlices publishing devices on every GPU node. Core APIs are those of
Kubernetes 1.20 (core/v1, apps/v1, batch/v1); the GPU Operator's and DRA's are found by
discovery, and their absence is a skip, not an error. The synchronous `kubernetes` client
runs in threads (asyncio.to_thread).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.validation.custom_metrics import custom_metrics_api
from plumb.aggregator.validation.nccl_pair import NCCL_PAIR, RunNodes

__all__ = ["KUBERNETES", "GPU_RESOURCE", "Kube", "Verdict", "run_check"]

log = logging.getLogger(__name__)

Verdict = tuple[str, str, dict[str, str]]  # status, message, details
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
HEALTH_MONITORS = ("dcgm-exporter", "nvsentinel")
CHECK_LABEL = "plumb.dev/check"
DEFAULT_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


@dataclass(frozen=True)
class Kube:
    """The aggregator's Kubernetes client and where validation workloads go."""

    api: client.ApiClient
    namespace: str
    poll_s: float = 0.5
    # Whether this replica holds the Lease: only the leader creates validation workloads.
    leader: Callable[[], bool] = lambda: True


def _condition(conditions: list[Any] | None, kind: str) -> Any | None:
    return next((c for c in conditions or () if c.type == kind), None)


# -- gpu-scheduling -------------------------------------------------------------------------


def _job(name: str, check: CheckDef, *, gpus: int = 1) -> client.V1Job:
    """The check's Job: its image and script or command (parameters), `gpus` GPUs; with none
    requested, it is pinned to GPU nodes by their label instead."""
    image = str(check.parameters.get("image", DEFAULT_IMAGE))
    script = check.parameters.get("script")  # a shell script, or a plain `command` line
    argv = (
        ["sh", "-c", str(script)]
        if script is not None
        else str(check.parameters.get("command", "nvidia-smi -L")).split()
    )
    labels = {"app.kubernetes.io/managed-by": "plumb", CHECK_LABEL: check.id}
    container = client.V1Container(
        name="gpu",
        image=image,
        command=argv,
        resources=client.V1ResourceRequirements(limits={GPU_RESOURCE: str(gpus)} if gpus else None),
    )
    pod = client.V1PodSpec(
        restart_policy="Never",
        containers=[container],
        tolerations=[client.V1Toleration(key=GPU_RESOURCE, operator="Exists")],
        node_selector=None if gpus else {GPU_PRESENT_LABEL: "true"},
        automount_service_account_token=False,
    )
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1JobSpec(
            backoff_limit=0,
            active_deadline_seconds=max(1, int(check.timeout_s) + 30),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels), spec=pod
            ),
        ),
    )


async def gpu_scheduling(kube: Kube, check: CheckDef) -> Verdict:
    """A Job requesting one GPU is scheduled and completes within the check's timeout."""
    status, message, details = await _run_job(kube, check, gpus=1)
    if status == "pass":
        took = details.pop("took_s")
        where = details.get("node") or "a node"
        message = f"a pod requesting {GPU_RESOURCE}: 1 ran on {where} and completed in {took} s"
    return status, message, details


async def secure_accelerator_access(kube: Kube, check: CheckDef) -> Verdict:
    """A Job requesting no GPU, on a GPU node, completes: its command (exit 0 when it sees no
    GPU device) found none. A failed Job is a pod reaching GPUs it never asked for."""
    status, message, details = await _run_job(kube, check, gpus=0)
    where = details.get("node") or "a GPU node"
    if status == "pass":
        details.pop("took_s")
        return "pass", f"a pod requesting no {GPU_RESOURCE} on {where} saw no GPU", details
    if status == "fail" and message.startswith("the Job failed"):
        return "fail", f"a pod requesting no {GPU_RESOURCE} on {where} sees GPUs", details
    return status, message, details


async def _run_job(kube: Kube, check: CheckDef, *, gpus: int) -> Verdict:
    """Create the check's Job, wait for it within the check's timeout, always delete it."""
    if not kube.leader():
        why = "another replica holds the Lease and runs validation Jobs: ask the leader"
        return "skip", why, {}
    batch, core = client.BatchV1Api(kube.api), client.CoreV1Api(kube.api)
    name = f"plumb-{check.id}-{uuid.uuid4().hex[:8]}"
    ns = kube.namespace
    details = {"namespace": ns, "job": name}
    try:
        await asyncio.to_thread(batch.create_namespaced_job, ns, _job(name, check, gpus=gpus))
    except client.ApiException as exc:
        return "error", f"cannot create Job {ns}/{name}: {exc.status} {exc.reason}", details
    started = time.monotonic()
    request = f"{GPU_RESOURCE}: {gpus}" if gpus else f"no {GPU_RESOURCE} on a GPU node"
    try:
        return await _wait_job(
            batch, core, ns, name, request, check.timeout_s, kube.poll_s, details
        )
    finally:
        await asyncio.shield(asyncio.to_thread(_delete_job, batch, ns, name))
        details["cleanup"] = "Job deleted (propagation Background)"
        log.debug("validation Job deleted", extra={"job": name, "s": time.monotonic() - started})


async def _wait_job(
    batch: client.BatchV1Api,
    core: client.CoreV1Api,
    ns: str,
    name: str,
    request: str,
    timeout_s: float,
    poll_s: float,
    details: dict[str, str],
) -> Verdict:
    deadline = time.monotonic() + timeout_s
    unscheduled = "the pod was not created"
    node = ""
    while True:
        job = await asyncio.to_thread(batch.read_namespaced_job_status, name, ns)
        pods = await asyncio.to_thread(
            core.list_namespaced_pod, ns, label_selector=f"job-name={name}"
        )
        for pod in pods.items:
            if pod.spec.node_name:
                node = pod.spec.node_name
                details["node"] = node
            else:
                cond = _condition(pod.status.conditions, "PodScheduled")
                unscheduled = (cond.message or cond.reason) if cond else "not yet considered"
        conditions = job.status.conditions if job.status else None
        complete, failed = _condition(conditions, "Complete"), _condition(conditions, "Failed")
        if complete is not None and complete.status == "True":
            took = timeout_s - max(0.0, deadline - time.monotonic())
            details["took_s"] = f"{took:.1f}"
            return "pass", "the Job completed", details
        if failed is not None and failed.status == "True":
            where = f" on {node}" if node else ""
            return "fail", f"the Job failed{where}: {failed.reason}: {failed.message}", details
        if time.monotonic() >= deadline:
            if node:
                why = f"its pod was scheduled on {node} but did not complete within {timeout_s:g} s"
                return "fail", why, details
            details["scheduler"] = unscheduled
            return (
                "fail",
                f"no node could schedule a pod requesting {request} within"
                f" {timeout_s:g} s: {unscheduled}",
                details,
            )
        await asyncio.sleep(poll_s)


def _delete_job(batch: client.BatchV1Api, ns: str, name: str) -> None:
    try:
        batch.delete_namespaced_job(name, ns, propagation_policy="Background")
    except client.ApiException as exc:
        if exc.status != 404:
            log.warning("validation Job not deleted", extra={"job": name, "error": str(exc)})


# -- gpu-health-monitor ---------------------------------------------------------------------


def _is_monitor(ds: client.V1DaemonSet) -> bool:
    labels = ds.metadata.labels or {}
    words = [ds.metadata.name, *labels.values()]
    return any(m in w.lower() for w in words for m in HEALTH_MONITORS)


async def gpu_health_monitor(kube: Kube, check: CheckDef) -> Verdict:
    """A dcgm-exporter or NVSentinel DaemonSet exists and every one of its pods is ready."""
    apps = client.AppsV1Api(kube.api)
    found = await asyncio.to_thread(apps.list_daemon_set_for_all_namespaces)
    monitors = [ds for ds in found.items if _is_monitor(ds)]
    if not monitors:
        return "fail", "no dcgm-exporter or NVSentinel DaemonSet in any namespace", {}
    details, unready = {}, []
    for ds in monitors:
        key = f"{ds.metadata.namespace}/{ds.metadata.name}"
        desired = (ds.status.desired_number_scheduled or 0) if ds.status else 0
        ready = (ds.status.number_ready or 0) if ds.status else 0
        details[key] = f"{ready}/{desired} ready"
        if desired == 0 or ready != desired:
            unready.append(f"{key} {ready}/{desired} ready")
    if unready:
        return "fail", "GPU health monitor not fully ready: " + "; ".join(unready), details
    return "pass", f"{', '.join(details)} ready on every node it targets", details


# -- nodes-ready ----------------------------------------------------------------------------


def _is_gpu_node(node: client.V1Node) -> bool:
    if (node.metadata.labels or {}).get(GPU_PRESENT_LABEL) == "true":
        return True
    capacity = (node.status.capacity or {}) if node.status else {}
    try:
        return int(capacity.get(GPU_RESOURCE, "0")) > 0
    except ValueError:
        return False


async def nodes_ready(kube: Kube, check: CheckDef) -> Verdict:
    """Every GPU node (labelled present, or with GPU capacity) is Ready."""
    core = client.CoreV1Api(kube.api)
    nodes = [n for n in (await asyncio.to_thread(core.list_node)).items if _is_gpu_node(n)]
    if not nodes:
        return "skip", "no GPU node in the cluster", {}
    details, bad = {}, []
    for n in sorted(nodes, key=lambda n: n.metadata.name):
        cond = _condition(n.status.conditions if n.status else None, "Ready")
        if cond is not None and cond.status == "True":
            details[n.metadata.name] = "Ready"
            continue
        why = (
            f"{cond.status}: {cond.reason or ''} {cond.message or ''}".strip()
            if cond
            else "no Ready condition"
        )
        details[n.metadata.name] = f"not Ready ({why})"
        bad.append(f"{n.metadata.name} ({why})")
    if bad:
        return "fail", f"{len(bad)} of {len(nodes)} GPU nodes not Ready: " + "; ".join(bad), details
    return "pass", f"all {len(nodes)} GPU nodes Ready", details


# -- gpu-operator-health --------------------------------------------------------------------

CLUSTER_POLICY = ("nvidia.com", "clusterpolicies")
OPERATOR_NAMES = ("gpu-operator",)


def _served(kube: Kube, group: str) -> list[str]:
    """The versions of API group `group` the server serves, preferred first; [] if none."""
    for g in client.ApisApi(kube.api).get_api_versions().groups:
        if g.name == group:
            preferred = g.preferred_version.version if g.preferred_version else None
            versions = [v.version for v in g.versions]
            return sorted(versions, key=lambda v: v != preferred)
    return []


def _list(kube: Kube, group: str, version: str, plural: str) -> list[dict]:
    custom = client.CustomObjectsApi(kube.api)
    return custom.list_cluster_custom_object(group, version, plural).get("items", [])


def _is_operator(d: client.V1Deployment) -> bool:
    labels = d.metadata.labels or {}
    names = (d.metadata.name, labels.get("app"), labels.get("app.kubernetes.io/name"))
    return any(n in OPERATOR_NAMES for n in names if n)


async def gpu_operator_health(kube: Kube, check: CheckDef) -> Verdict:
    """The GPU Operator's Deployment has an available replica and every ClusterPolicy's
    status.state is `ready`; skipped where the ClusterPolicy API is not installed."""
    group, plural = CLUSTER_POLICY
    versions = await asyncio.to_thread(_served, kube, group)
    if not versions:
        return "skip", "no ClusterPolicy API (nvidia.com): the GPU Operator is not installed", {}
    policies = await asyncio.to_thread(_list, kube, group, versions[0], plural)
    apps = client.AppsV1Api(kube.api)
    deployments = await asyncio.to_thread(apps.list_deployment_for_all_namespaces)
    details, bad = {}, []
    operators = [d for d in deployments.items if _is_operator(d)]
    if not operators:
        bad.append("no gpu-operator Deployment in any namespace")
    for d in operators:
        key = f"{d.metadata.namespace}/{d.metadata.name}"
        available = (d.status.available_replicas or 0) if d.status else 0
        details[key] = f"{available} available"
        if not available:
            bad.append(f"Deployment {key} has no available replica")
    if not policies:
        bad.append("no ClusterPolicy: the operator deploys no operand")
    for policy in policies:
        name, status = policy["metadata"]["name"], policy.get("status") or {}
        state = status.get("state") or "(no state)"
        details[f"clusterpolicy/{name}"] = state
        if state != "ready":
            why = "; ".join(
                f"{c.get('type')}: {c.get('reason') or ''} {c.get('message') or ''}".strip()
                for c in status.get("conditions") or ()
                if c.get("status") == "True" and c.get("type") != "Ready"
            )
            bad.append(f"ClusterPolicy {name} is {state}" + (f" ({why})" if why else ""))
    if bad:
        return "fail", "; ".join(bad), details
    return "pass", f"{', '.join(details)}: operator available, ClusterPolicy ready", details


# -- dra-support ----------------------------------------------------------------------------

DRA_GROUP = "resource.k8s.io"


async def dra_support(kube: Kube, check: CheckDef) -> Verdict:
    """The resource.k8s.io API is served, the GPU DeviceClass exists, and every GPU node has a
    ResourceSlice of the GPU DRA driver publishing at least one device."""
    driver = str(check.parameters.get("driver", "gpu.nvidia.com"))
    device_class = str(check.parameters.get("device_class", driver))
    versions = await asyncio.to_thread(_served, kube, DRA_GROUP)
    if not versions:
        why = f"the server does not serve {DRA_GROUP} (DRA needs Kubernetes 1.32+, GA in 1.34)"
        return "skip", why, {}
    version = versions[0]
    details = {"api": f"{DRA_GROUP}/{version}"}
    classes = await asyncio.to_thread(_list, kube, DRA_GROUP, version, "deviceclasses")
    if not any(c["metadata"]["name"] == device_class for c in classes):
        why = f"no DeviceClass {device_class}: the GPU DRA driver is not installed"
        return "skip", why, details
    slices = await asyncio.to_thread(_list, kube, DRA_GROUP, version, "resourceslices")
    devices: dict[str, int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == driver and spec.get("nodeName"):
            node = spec["nodeName"]
            devices[node] = devices.get(node, 0) + len(spec.get("devices") or ())
    core = client.CoreV1Api(kube.api)
    gpu_nodes = sorted(
        n.metadata.name for n in (await asyncio.to_thread(core.list_node)).items if _is_gpu_node(n)
    )
    for node in gpu_nodes:
        details[node] = f"{devices.get(node, 0)} devices"
    missing = [n for n in gpu_nodes if not devices.get(n)]
    if not devices:
        return "fail", f"no ResourceSlice of driver {driver} publishes a device", details
    if missing:
        return (
            "fail",
            f"{len(missing)} of {len(gpu_nodes)} GPU nodes publish no {driver} device: "
            + ", ".join(missing),
            details,
        )
    total = sum(devices.values())
    return "pass", f"DeviceClass {device_class}; {total} devices on {len(devices)} nodes", details


KUBERNETES: dict[str, Callable[[Kube, CheckDef], Awaitable[Verdict]]] = {
    "gpu-scheduling": gpu_scheduling,
    "gpu-health-monitor": gpu_health_monitor,
    "nodes-ready": nodes_ready,
    "secure-accelerator-access": secure_accelerator_access,
    "gpu-operator-health": gpu_operator_health,
    "dra-support": dra_support,
    "custom-metrics-api": custom_metrics_api,
}


async def run_check(kube: Kube, check: CheckDef, nodes: RunNodes | None = None) -> Verdict:
    """One Kubernetes check, bounded by its timeout (plus a little for the Job's cleanup);
    the two-node NCCL checks (nccl_pair.py) also get the run's nodes to choose from."""
    try:
        async with asyncio.timeout(check.timeout_s + 10):
            if check.id in NCCL_PAIR:
                return await NCCL_PAIR[check.id](kube, check, nodes)
            return await KUBERNETES[check.id](kube, check)
    except TimeoutError:
        return "error", f"no answer from the Kubernetes API within {check.timeout_s:g} s", {}
    except client.ApiException as exc:
        return "error", f"Kubernetes API: {exc.status} {exc.reason}", {}
    except Exception as exc:  # urllib3 / TLS errors: the run goes on
        return "error", f"Kubernetes API: {type(exc).__name__}: {exc}", {}
