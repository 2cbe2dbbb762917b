"""Kubernetes checks: cluster-wide, against the API server, once per run (node "(cluster)").

`gpu-scheduling` creates a batch/v1 Job requesting one GPU in the validation namespace and
waits, within the check's timeout, for its pod to be scheduled and the Job to complete; the
Job is always deleted (propagation Background), even on failure or cancellation.
`gpu-health-monitor` looks for a dcgm-exporter or NVSentinel DaemonSet that is fully ready;
`nodes-ready` wants every GPU node Ready. Only APIs present in Kubernetes 1.20 (core/v1,
apps/v1, batch/v1). The synchronous `kubernetes` client runs in threads (asyncio.to_thread).
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


def _job(name: str, check: CheckDef) -> client.V1Job:
    image = str(check.parameters.get("image", DEFAULT_IMAGE))
    command = str(check.parameters.get("command", "nvidia-smi -L")).split()
    labels = {"app.kubernetes.io/managed-by": "plumb", CHECK_LABEL: check.id}
    container = client.V1Container(
        name="gpu",
        image=image,
        command=command,
        resources=client.V1ResourceRequirements(limits={GPU_RESOURCE: "1"}),
    )
    pod = client.V1PodSpec(
        restart_policy="Never",
        containers=[container],
        tolerations=[client.V1Toleration(key=GPU_RESOURCE, operator="Exists")],
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
    if not kube.leader():
        why = "another replica holds the Lease and runs validation Jobs: ask the leader"
        return "skip", why, {}
    batch, core = client.BatchV1Api(kube.api), client.CoreV1Api(kube.api)
    name = f"plumb-gpu-scheduling-{uuid.uuid4().hex[:8]}"
    ns = kube.namespace
    details = {"namespace": ns, "job": name}
    try:
        await asyncio.to_thread(batch.create_namespaced_job, ns, _job(name, check))
    except client.ApiException as exc:
        return "error", f"cannot create Job {ns}/{name}: {exc.status} {exc.reason}", details
    started = time.monotonic()
    try:
        return await _wait_job(batch, core, ns, name, check.timeout_s, kube.poll_s, details)
    finally:
        await asyncio.shield(asyncio.to_thread(_delete_job, batch, ns, name))
        details["cleanup"] = "Job deleted (propagation Background)"
        log.debug("validation Job deleted", extra={"job": name, "s": time.monotonic() - started})


async def _wait_job(
    batch: client.BatchV1Api,
    core: client.CoreV1Api,
    ns: str,
    name: str,
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
            return (
                "pass",
                f"a pod requesting {GPU_RESOURCE}: 1 ran on {node or 'a node'} and completed"
                f" in {took:.1f} s",
                details,
            )
        if failed is not None and failed.status == "True":
            where = f" on {node}" if node else ""
            return "fail", f"the GPU Job failed{where}: {failed.reason}: {failed.message}", details
        if time.monotonic() >= deadline:
            if node:
                why = f"its pod was scheduled on {node} but did not complete within {timeout_s:g} s"
                return "fail", why, details
            details["scheduler"] = unscheduled
            return (
                "fail",
                f"no node could schedule a pod requesting {GPU_RESOURCE}: 1 within"
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


KUBERNETES: dict[str, Callable[[Kube, CheckDef], Awaitable[Verdict]]] = {
    "gpu-scheduling": gpu_scheduling,
    "gpu-health-monitor": gpu_health_monitor,
    "nodes-ready": nodes_ready,
}


async def run_check(kube: Kube, check: CheckDef) -> Verdict:
    """One Kubernetes check, bounded by its timeout (plus a little for the Job's cleanup)."""
    try:
        async with asyncio.timeout(check.timeout_s + 10):
            return await KUBERNETES[check.id](kube, check)
    except TimeoutError:
        return "error", f"no answer from the Kubernetes API within {check.timeout_s:g} s", {}
    except client.ApiException as exc:
        return "error", f"Kubernetes API: {exc.status} {exc.reason}", {}
    except Exception as exc:  # urllib3 / TLS errors: the run goes on
        return "error", f"Kubernetes API: {type(exc).__name__}: {exc}", {}
