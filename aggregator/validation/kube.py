"""The client the Kubernetes checks share, and how their workloads run.

`Kube` is the aggregator's client and the namespace validation workloads go to; a check
returns a `Verdict`. The rest is what more than one check needs: conditions and discovery
reads, the one-GPU Job (created, waited on within the check's timeout, always deleted with
its pods, even on failure or cancellation), and the bare pods that use a PodGroup or a
ResourceClaim, with their deletion. It imports no check, so the check modules
(workloads.py, cluster_state.py, nccl_pair.py, custom_metrics.py) import it at run time.
The synchronous `kubernetes` client runs in threads (asyncio.to_thread).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from plumb.aggregator.recipes import Catalog, Resolution
from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.recipes.schema import PlatformHealth

__all__ = [
    "CHECK_LABEL",
    "DEFAULT_IMAGE",
    "DRA_GROUP",
    "GPU_PRESENT_LABEL",
    "GPU_RESOURCE",
    "ClusterRecipe",
    "Kube",
    "Verdict",
    "bare_pod",
    "cluster_objects",
    "cluster_recipe",
    "condition",
    "delete",
    "delete_job",
    "delete_workload",
    "ended_why",
    "pending_why",
    "run_job",
    "served_versions",
    "workload_labels",
]

log = logging.getLogger(__name__)

Verdict = tuple[str, str, dict[str, str]]  # status, message, details

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
CHECK_LABEL = "plumb.dev/check"
DEFAULT_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
DRA_GROUP = "resource.k8s.io"


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


def condition(conditions: list[Any] | None, kind: str) -> Any | None:
    """The condition of type `kind` among an object's `conditions`, or None."""
    return next((c for c in conditions or () if c.type == kind), None)


def served_versions(kube: Kube, group: str) -> list[str]:
    """The versions of API group `group` the server serves, preferred first; [] if none."""
    for g in client.ApisApi(kube.api).get_api_versions().groups:
        if g.name == group:
            preferred = g.preferred_version.version if g.preferred_version else None
            versions = [v.version for v in g.versions]
            return sorted(versions, key=lambda v: v != preferred)
    return []


def cluster_objects(kube: Kube, group: str, version: str, plural: str) -> list[dict]:
    """Every cluster-scoped custom object `plural` of `group`/`version`, as plain dicts."""
    custom = client.CustomObjectsApi(kube.api)
    return custom.list_cluster_custom_object(group, version, plural).get("items", [])


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


async def run_job(kube: Kube, check: CheckDef, *, gpus: int) -> Verdict:
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
        await asyncio.shield(asyncio.to_thread(delete_job, batch, core, ns, name))
        details["cleanup"] = "Job and its pods deleted"
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
                cond = condition(pod.status.conditions, "PodScheduled")
                unscheduled = (cond.message or cond.reason) if cond else "not yet considered"
        conditions = job.status.conditions if job.status else None
        complete, failed = condition(conditions, "Complete"), condition(conditions, "Failed")
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


def delete_job(batch: client.BatchV1Api, core: client.CoreV1Api, ns: str, name: str) -> None:
    """Delete the Job, then its pods ourselves: the garbage collector that would delete them
    stalls on a cluster whose aggregated API is unavailable, and they would linger."""
    delete(batch.delete_namespaced_job, name, ns, propagation_policy="Background")
    delete(core.delete_collection_namespaced_pod, ns, label_selector=f"job-name={name}")


def delete(call: Callable[..., object], *args: object, **kwargs: object) -> None:
    """Make one delete call: gone already (404) is done; any other error is logged, so the
    caller's next deletion still runs. Answers are not decoded (_preload_content=False): a
    1.20 server answers some deletes with a Status the client fails to read as the object."""
    try:
        call(*args, **kwargs, _preload_content=False)
    except client.ApiException as exc:
        if exc.status != 404:
            log.warning("validation object not deleted", extra={"obj": args, "error": str(exc)})
    except Exception as exc:  # urllib3 / TLS
        log.warning("validation object not deleted", extra={"obj": args, "error": str(exc)})


def workload_labels(check: CheckDef) -> dict[str, str]:
    """The labels every Plumb validation workload carries: managed by Plumb, and which check."""
    return {"app.kubernetes.io/managed-by": "plumb", CHECK_LABEL: check.id}


def bare_pod(
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


def pending_why(pod: client.V1Pod, scheduler: str) -> str:
    """Why a pod is not bound: its PodScheduled condition, else that nothing looked at it."""
    cond = condition(pod.status.conditions if pod.status else None, "PodScheduled")
    said = ": ".join(w for w in (cond.reason, cond.message) if w) if cond is not None else ""
    return said or f"not yet considered by {scheduler}"


def ended_why(pod: client.V1Pod) -> str:
    """How a pod ended: its first terminated container's exit code and message, else its
    reason or phase."""
    for status in (pod.status.container_statuses or ()) if pod.status else ():
        ended = status.state.terminated if status.state else None
        if ended is not None:
            said = (ended.message or "").strip()
            return f"exit {ended.exit_code}" + (f": {said}" if said else "")
    return (pod.status.reason or pod.status.phase or "unknown") if pod.status else "unknown"


def delete_workload(kube: Kube, pods: list[str], custom: tuple[str, str, str, str] | None) -> None:
    """Delete the check's pods, then the object they use (PodGroup, ResourceClaim)."""
    core = client.CoreV1Api(kube.api)
    for pod in pods:
        delete(core.delete_namespaced_pod, pod, kube.namespace, grace_period_seconds=0)
    if custom is not None:
        group, version, plural, name = custom
        objects = client.CustomObjectsApi(kube.api)
        ns = kube.namespace
        delete(objects.delete_namespaced_custom_object, group, version, ns, plural, name)
