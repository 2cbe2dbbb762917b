"""Kubernetes checks that run a workload and judge how it went.

`gpu-scheduling` runs a batch/v1 Job requesting one GPU and wants its pod scheduled and the
Job complete within the check's timeout; `secure-accelerator-access` runs a Job that requests
no GPU on a GPU node and wants it to see none. `gang-scheduling` runs a PodGroup of bare pods
through the recipe's gang scheduler and wants them bound together. `dra_claim` is the second
half of `dra-support` (cluster_state.py has the first): a ResourceClaim for one device and a
pod using it that sees exactly one GPU. Every workload is deleted at the end, also on
failure, timeout or cancellation (kube.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kubernetes import client

from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.validation.kube import (
    DRA_GROUP,
    GPU_RESOURCE,
    Kube,
    Verdict,
    bare_pod,
    delete_workload,
    ended_why,
    pending_why,
    run_job,
    served_versions,
    workload_labels,
)

__all__ = ["dra_claim", "gang_scheduling", "gpu_scheduling", "secure_accelerator_access"]


# -- gpu-scheduling, secure-accelerator-access ---------------------------------------------


async def gpu_scheduling(kube: Kube, check: CheckDef) -> Verdict:
    """A Job requesting one GPU is scheduled and completes within the check's timeout."""
    status, message, details = await run_job(kube, check, gpus=1)
    if status == "pass":
        took = details.pop("took_s")
        where = details.get("node") or "a node"
        message = f"a pod requesting {GPU_RESOURCE}: 1 ran on {where} and completed in {took} s"
    return status, message, details


async def secure_accelerator_access(kube: Kube, check: CheckDef) -> Verdict:
    """A Job requesting no GPU, on a GPU node, completes: its command (exit 0 when it sees no
    GPU device) found none. A failed Job is a pod reaching GPUs it never asked for."""
    status, message, details = await run_job(kube, check, gpus=0)
    where = details.get("node") or "a GPU node"
    if status == "pass":
        details.pop("took_s")
        return "pass", f"a pod requesting no {GPU_RESOURCE} on {where} saw no GPU", details
    if status == "fail" and message.startswith("the Job failed"):
        return "fail", f"a pod requesting no {GPU_RESOURCE} on {where} sees GPUs", details
    return status, message, details


# -- gang-scheduling -----------------------------------------------------------------------


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
    if version not in await asyncio.to_thread(served_versions, kube, group):
        return "skip", f"no PodGroup API ({group}/{version}): {scheduler} is not installed", {}
    if not kube.leader():
        return "skip", "another replica holds the Lease and runs validation pods", {}
    count, gpus = int(p.get("pods", 2)), int(p.get("gpus_per_pod", 1))
    queue = str(p.get("queue", "default-queue"))
    ns, group_name = kube.namespace, f"plumb-gang-{uuid.uuid4().hex[:8]}"
    names = [f"{group_name}-{i}" for i in range(count)]
    labels = {**workload_labels(check), str(p.get("queue_label", "kai.scheduler/queue")): queue}
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
                pod = bare_pod(
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
        await asyncio.shield(asyncio.to_thread(delete_workload, kube, names, custom_ref))
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
            why = f"pod {failed.metadata.name} failed on {where}: {ended_why(failed)}"
            return "fail", f"{gang} were bound together, but {why}", details
        if len(bound) == len(names):
            details.update(bound)
            nodes = ", ".join(sorted(set(bound.values())))
            return "pass", f"{scheduler} bound all {gang} together, on {nodes}", details
        if time.monotonic() >= deadline:
            pending = [p for p in pods if not p.spec.node_name]
            for p in pods:
                details[p.metadata.name] = bound.get(p.metadata.name) or "pending"
            waits = "; ".join(f"{p.metadata.name} ({pending_why(p, scheduler)})" for p in pending)
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


# -- dra-support: a claim and a pod using it -----------------------------------------------


def _device_request(version: str, device_class: str) -> dict[str, Any]:
    """One device of `device_class`: v1beta1 puts the class on the request, later versions
    under `exactly`."""
    one = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    return {"name": "gpu", **one} if version == "v1beta1" else {"name": "gpu", "exactly": one}


async def dra_claim(
    kube: Kube, check: CheckDef, version: str, details: dict[str, str], slices: str
) -> Verdict:
    """A ResourceClaim for one device of the GPU DeviceClass is allocated and a pod using it
    runs and sees exactly one GPU (its script's exit status); both deleted after."""
    device_class = str(check.parameters.get("device_class", "gpu.nvidia.com"))
    if not kube.leader():
        return "pass", f"{slices}; the claim and pod test runs on the Lease holder", details
    ns, name = kube.namespace, f"plumb-dra-{uuid.uuid4().hex[:8]}"
    labels = workload_labels(check)
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
            pod = bare_pod(name, check, labels, claim=name)
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
                why = f"its pod on {node} did not see exactly one GPU: {ended_why(pod)}"
                return (
                    "fail",
                    f"{what} was allocated ({devices or 'no device'}), but {why}",
                    details,
                )
            if time.monotonic() >= deadline:
                if allocation is None:
                    waits = pending_why(pod, "the scheduler")
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
        await asyncio.shield(asyncio.to_thread(delete_workload, kube, [name], custom_ref))
        details["cleanup"] = "pod and ResourceClaim deleted"
