"""Kubernetes checks: cluster-wide, against the API server, once per run (node "(cluster)").

`gpu-scheduling` creates a batch/v1 Job requesting one GPU in the validation namespace and
waits, within the check's timeout, for its pod to be scheduled and the Job to complete; the
Job is always deleted (propagation Background), even on failure or cancellation.
`gpu-health-monitor` looks for a dcgm-exporter or NVSentinel DaemonSet that is fully ready;
`nodes-ready` wants every GPU node Ready. `secure-accelerator-access` runs a Job that requests
no GPU on a GPU node and wants it to see none; `gpu-operator-health` reads the ClusterPolicy's
state and the operator Deployment; `dra-support` wants the resource.k8s.io API, the GPU
DeviceClass and ResourceSlices publishing devices on every GPU node, then a ResourceClaim for
one device and a pod using it that sees exactly one GPU. `gang-scheduling` runs a PodGroup of
bare pods through the recipe's gang scheduler and wants them bound together;
`platform-health` wants the recipe's platform operators available and their CRDs served
(Kube.recipe says what the nodes' recipes deploy). Core APIs are those of
Kubernetes 1.20 (core/v1, apps/v1, batch/v1); the GPU Operator's and DRA's are found by
discovery, and their absence is a skip, not an error. The synchronous `kubernetes` client
runs in threads (asyncio.to_thread).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from plumb.aggregator.recipes import Catalog, Resolution
from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.recipes.schema import PlatformHealth
from plumb.aggregator.validation.custom_metrics import custom_metrics_api
from plumb.aggregator.validation.nccl_pair import NCCL_PAIR, RunNodes

__all__ = [
    "KUBERNETES",
    "GPU_RESOURCE",
    "ClusterRecipe",
    "Kube",
    "Verdict",
    "cluster_recipe",
    "run_check",
]

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
    # What the cluster's resolved recipes deploy (gang-scheduling, platform-health).
    recipe: Callable[[], ClusterRecipe] = lambda: ClusterRecipe()


@dataclass(frozen=True)
class ClusterRecipe:
    """What the nodes' resolved recipes deploy, together: components (name -> namespace) and
    each platform criterion with its mixin's health expectations."""

    components: Mapping[str, str] = field(default_factory=dict)
    platforms: Mapping[str, tuple[PlatformHealth, ...]] = field(default_factory=dict)


def cluster_recipe(catalog: Catalog, resolutions: Iterable[Resolution]) -> ClusterRecipe:
    """The union of `resolutions` (one per node): every component, every platform not `any`."""
    components: dict[str, str] = {}
    platforms: dict[str, tuple[PlatformHealth, ...]] = {}
    for r in resolutions:
        components.update({c["name"]: c.get("namespace") or "" for c in r.components})
        if r.criteria.platform != "any":
            health = [catalog.mixins[m].health for m in r.mixins]
            platforms[r.criteria.platform] = tuple(h for h in health if h is not None)
    return ClusterRecipe(components, platforms)


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
    slices = f"DeviceClass {device_class}; {total} devices on {len(devices)} nodes"
    return await _dra_claim(kube, check, version, details, slices)


# -- workload pods: gang-scheduling, dra-support's claim ------------------------------------


def _labels(check: CheckDef) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "plumb", CHECK_LABEL: check.id}


def _bare_pod(
    name: str,
    check: CheckDef,
    labels: dict[str, str],
    *,
    gpus: int = 0,
    claim: str | None = None,
    scheduler: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod of the check (its image and script), requesting `gpus` GPUs or one DRA claim.
    A failed container's log tail becomes its termination message, so the verdict can quote
    it without reading logs."""
    resources: dict[str, Any] = {"limits": {GPU_RESOURCE: str(gpus)}} if gpus else {}
    if claim:
        resources["claims"] = [{"name": "gpu"}]
    container = {
        "name": "gpu",
        "image": str(check.parameters.get("image", DEFAULT_IMAGE)),
        "command": ["sh", "-c", str(check.parameters.get("script", "nvidia-smi -L"))],
        "resources": resources,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists"}],
        "containers": [container],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    meta = {"name": name, "labels": labels, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _pending_why(pod: client.V1Pod, scheduler: str) -> str:
    """Why a pod is not bound: its PodScheduled condition, else that nothing looked at it."""
    cond = _condition(pod.status.conditions if pod.status else None, "PodScheduled")
    said = ": ".join(w for w in (cond.reason, cond.message) if w) if cond is not None else ""
    return said or f"not yet considered by {scheduler}"


def _ended_why(pod: client.V1Pod) -> str:
    for status in (pod.status.container_statuses or ()) if pod.status else ():
        ended = status.state.terminated if status.state else None
        if ended is not None:
            said = (ended.message or "").strip()
            return f"exit {ended.exit_code}" + (f": {said}" if said else "")
    return (pod.status.reason or pod.status.phase or "unknown") if pod.status else "unknown"


def _delete_workload(kube: Kube, pods: list[str], custom: tuple[str, str, str, str] | None) -> None:
    """Delete the check's pods, then the object they use (PodGroup, ResourceClaim)."""
    core = client.CoreV1Api(kube.api)
    deletes: list[Callable[[], object]] = [
        lambda n=n: core.delete_namespaced_pod(n, kube.namespace, grace_period_seconds=0)
        for n in pods
    ]
    if custom is not None:
        group, version, plural, name = custom
        objects = client.CustomObjectsApi(kube.api)
        deletes.append(
            lambda: objects.delete_namespaced_custom_object(
                group, version, kube.namespace, plural, name
            )
        )
    for delete in deletes:
        try:
            delete()
        except client.ApiException as exc:
            if exc.status != 404:
                log.warning("validation object not deleted", extra={"error": str(exc)})


# -- gang-scheduling ------------------------------------------------------------------------


async def gang_scheduling(kube: Kube, check: CheckDef) -> Verdict:
    """The recipe's gang scheduler admits a gang: `pods` pods of one PodGroup (minMember =
    pods), each requesting `gpus_per_pod` GPUs, are all bound to nodes, or the verdict names
    the pods left pending and the scheduler's reason. Skipped when the recipe deploys no gang
    scheduler or its PodGroup API is not served."""
    p = check.parameters
    scheduler = str(p.get("scheduler", "kai-scheduler"))
    group, _, version = str(p.get("podgroup_api", "scheduling.run.ai/v2alpha2")).partition("/")
    if scheduler not in kube.recipe().components:
        return "skip", f"the recipe deploys no gang scheduler ({scheduler})", {}
    if version not in await asyncio.to_thread(_served, kube, group):
        return "skip", f"no PodGroup API ({group}/{version}): {scheduler} is not installed", {}
    if not kube.leader():
        return "skip", "another replica holds the Lease and runs validation pods", {}
    count, gpus = int(p.get("pods", 2)), int(p.get("gpus_per_pod", 1))
    queue = str(p.get("queue", "default-queue"))
    ns, group_name = kube.namespace, f"plumb-gang-{uuid.uuid4().hex[:8]}"
    names = [f"{group_name}-{i}" for i in range(count)]
    labels = {**_labels(check), str(p.get("queue_label", "kai.scheduler/queue")): queue}
    podgroup = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": group_name, "labels": labels},
        "spec": {"minMember": count, "queue": queue},
    }
    annotations = {str(p.get("podgroup_annotation", "pod-group-name")): group_name}
    details = {"namespace": ns, "podgroup": group_name}
    core, custom = client.CoreV1Api(kube.api), client.CustomObjectsApi(kube.api)
    try:
        try:
            await asyncio.to_thread(
                custom.create_namespaced_custom_object, group, version, ns, "podgroups", podgroup
            )
            for name in names:
                pod = _bare_pod(
                    name, check, labels, gpus=gpus, scheduler=scheduler, annotations=annotations
                )
                await asyncio.to_thread(core.create_namespaced_pod, ns, pod)
        except client.ApiException as exc:
            why = f"cannot create PodGroup {ns}/{group_name} and its pods"
            return "error", f"{why}: {exc.status} {exc.reason}", details
        request = f"{GPU_RESOURCE}: {gpus} each"
        return await _wait_gang(core, ns, names, scheduler, request, check, kube.poll_s, details)
    finally:
        custom_ref = (group, version, "podgroups", group_name)
        await asyncio.shield(asyncio.to_thread(_delete_workload, kube, names, custom_ref))
        details["cleanup"] = "pods and PodGroup deleted"


async def _wait_gang(
    core: client.CoreV1Api,
    ns: str,
    names: list[str],
    scheduler: str,
    request: str,
    check: CheckDef,
    poll_s: float,
    details: dict[str, str],
) -> Verdict:
    deadline = time.monotonic() + check.timeout_s
    gang = f"{len(names)} pods of PodGroup {details['podgroup']} ({request})"
    while True:
        pods = [await asyncio.to_thread(core.read_namespaced_pod, n, ns) for n in names]
        bound = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        failed = next((p for p in pods if p.status and p.status.phase == "Failed"), None)
        if failed is not None:
            where = bound.get(failed.metadata.name, "its node")
            why = f"pod {failed.metadata.name} failed on {where}: {_ended_why(failed)}"
            return "fail", f"{gang} were bound together, but {why}", details
        if len(bound) == len(names):
            details.update(bound)
            nodes = ", ".join(sorted(set(bound.values())))
            return "pass", f"{scheduler} bound all {gang} together, on {nodes}", details
        if time.monotonic() >= deadline:
            pending = [p for p in pods if not p.spec.node_name]
            for p in pods:
                details[p.metadata.name] = bound.get(p.metadata.name) or "pending"
            waits = "; ".join(f"{p.metadata.name} ({_pending_why(p, scheduler)})" for p in pending)
            if bound:
                split = ", ".join(f"{n} on {node}" for n, node in sorted(bound.items()))
                return (
                    "fail",
                    f"{scheduler} split the gang: bound {split}; pending {waits}",
                    details,
                )
            return (
                "fail",
                f"none of the {gang} was bound within {check.timeout_s:g} s; pending {waits}",
                details,
            )
        await asyncio.sleep(poll_s)


# -- platform-health ------------------------------------------------------------------------


def _crd_served(kube: Kube, crd: str) -> bool:
    """Whether discovery lists CRD `crd` (<plural>.<group>) in any served version: what
    clients see, with no read of CustomResourceDefinitions (no extra RBAC)."""
    plural, _, group = crd.partition(".")
    custom = client.CustomObjectsApi(kube.api)
    for version in _served(kube, group):
        resources = custom.get_api_resources(group, version).resources or ()
        if any(r.name == plural for r in resources):
            return True
    return False


async def platform_health(kube: Kube, check: CheckDef) -> Verdict:
    """For each platform of the recipe: every Deployment of its operators' releases available
    and every CRD it names served (the platform mixin's `health`, recipes/mixins/)."""
    recipe = kube.recipe()
    if not recipe.platforms:
        return "skip", "the recipe has no platform (recipes.platform is any)", {}
    instance = str(check.parameters.get("release_label", "app.kubernetes.io/instance"))
    apps = client.AppsV1Api(kube.api)
    details: dict[str, str] = {}
    bad: list[str] = []
    for platform, expectations in sorted(recipe.platforms.items()):
        for health in expectations:
            for operator in health.operators:
                ns = recipe.components.get(operator, "")
                found = await asyncio.to_thread(
                    apps.list_namespaced_deployment, ns, label_selector=f"{instance}={operator}"
                )
                if not found.items:
                    details[f"{ns}/{operator}"] = "no Deployment"
                    bad.append(f"{platform}: no Deployment of release {operator} in {ns}")
                for d in found.items:
                    key = f"{ns}/{d.metadata.name}"
                    want = max(1, d.spec.replicas if d.spec.replicas is not None else 1)
                    have = (d.status.available_replicas or 0) if d.status else 0
                    details[key] = f"{have}/{want} available"
                    if have < want:
                        cond = _condition(d.status.conditions if d.status else None, "Available")
                        why = f" ({cond.reason}: {cond.message})" if cond and cond.reason else ""
                        bad.append(f"{platform}: Deployment {key} {have}/{want} available{why}")
            for crd in health.crds:
                served = await asyncio.to_thread(_crd_served, kube, crd)
                details[f"crd/{crd}"] = "served" if served else "not served"
                if not served:
                    bad.append(f"{platform}: CRD {crd} is not served")
    if bad:
        return "fail", "; ".join(bad), details
    deployments = sum(1 for k in details if not k.startswith("crd/"))
    crds = len(details) - deployments
    platforms = ", ".join(sorted(recipe.platforms))
    return "pass", f"{platforms}: {deployments} Deployments available, {crds} CRDs served", details


# -- dra-support: a claim and a pod using it ------------------------------------------------


def _device_request(version: str, device_class: str) -> dict[str, Any]:
    """One device of `device_class`: v1beta1 puts the class on the request, later versions
    under `exactly`."""
    one = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    return {"name": "gpu", **one} if version == "v1beta1" else {"name": "gpu", "exactly": one}


async def _dra_claim(
    kube: Kube, check: CheckDef, version: str, details: dict[str, str], slices: str
) -> Verdict:
    """A ResourceClaim for one device of the GPU DeviceClass is allocated and a pod using it
    runs and sees exactly one GPU (its script's exit status); both deleted after."""
    device_class = str(check.parameters.get("device_class", "gpu.nvidia.com"))
    if not kube.leader():
        return "pass", f"{slices}; the claim and pod test runs on the Lease holder", details
    ns, name = kube.namespace, f"plumb-dra-{uuid.uuid4().hex[:8]}"
    labels = _labels(check)
    claim = {
        "apiVersion": f"{DRA_GROUP}/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {"devices": {"requests": [_device_request(version, device_class)]}},
    }
    details.update(claim=f"{ns}/{name}")
    core, custom = client.CoreV1Api(kube.api), client.CustomObjectsApi(kube.api)
    try:
        try:
            await asyncio.to_thread(
                custom.create_namespaced_custom_object, DRA_GROUP, version, ns,
                "resourceclaims", claim,
            )  # fmt: skip
            pod = _bare_pod(name, check, labels, claim=name)
            await asyncio.to_thread(core.create_namespaced_pod, ns, pod)
        except client.ApiException as exc:
            why = f"cannot create ResourceClaim {ns}/{name} and its pod"
            return "error", f"{why}: {exc.status} {exc.reason}", details
        deadline = time.monotonic() + check.timeout_s
        what = f"ResourceClaim {name} for one {device_class} device"
        while True:
            got = await asyncio.to_thread(
                custom.get_namespaced_custom_object, DRA_GROUP, version, ns,
                "resourceclaims", name,
            )  # fmt: skip
            allocation = (got.get("status") or {}).get("allocation")
            results = ((allocation or {}).get("devices") or {}).get("results") or ()
            devices = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
            if devices:
                details["allocated"] = devices
            pod = await asyncio.to_thread(core.read_namespaced_pod, name, ns)
            node = pod.spec.node_name or "no node"
            phase = pod.status.phase if pod.status else None
            if phase == "Succeeded":
                done = f"{what} was allocated ({devices}) and its pod on {node} saw one GPU"
                return "pass", f"{slices}; {done}", details
            if phase == "Failed":
                why = f"its pod on {node} did not see exactly one GPU: {_ended_why(pod)}"
                return (
                    "fail",
                    f"{what} was allocated ({devices or 'no device'}), but {why}",
                    details,
                )
            if time.monotonic() >= deadline:
                if allocation is None:
                    waits = _pending_why(pod, "the scheduler")
                    return (
                        "fail",
                        f"{what} was not allocated within {check.timeout_s:g} s: {waits}",
                        details,
                    )
                why = f"its pod on {node} did not finish within {check.timeout_s:g} s ({phase})"
                return "fail", f"{what} was allocated ({devices}), but {why}", details
            await asyncio.sleep(kube.poll_s)
    finally:
        custom_ref = (DRA_GROUP, version, "resourceclaims", name)
        await asyncio.shield(asyncio.to_thread(_delete_workload, kube, [name], custom_ref))
        details["cleanup"] = "pod and ResourceClaim deleted"


KUBERNETES: dict[str, Callable[[Kube, CheckDef], Awaitable[Verdict]]] = {
    "gpu-scheduling": gpu_scheduling,
    "gpu-health-monitor": gpu_health_monitor,
    "nodes-ready": nodes_ready,
    "secure-accelerator-access": secure_accelerator_access,
    "gpu-operator-health": gpu_operator_health,
    "dra-support": dra_support,
    "gang-scheduling": gang_scheduling,
    "platform-health": platform_health,
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
