"""Kubernetes checks that read the cluster's state from the API server and create nothing.

`gpu-health-monitor` looks for a dcgm-exporter or NVSentinel DaemonSet that is fully ready;
`nodes-ready` wants every GPU node Ready; `gpu-operator-health` reads the ClusterPolicy's
state and the operator Deployment; `dra-support` wants the resource.k8s.io API, the GPU
DeviceClass and ResourceSlices publishing devices on every GPU node, then hands over to its
claim and pod test (workloads.py); `platform-health` wants the recipe's platform operators
available and their CRDs served (Kube.recipe says what the nodes' recipes deploy). The GPU
Operator's and DRA's APIs are found by discovery, and their absence is a skip.
"""

from __future__ import annotations

import asyncio

from kubernetes import client

from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.validation.kube import (
    DRA_GROUP,
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    Kube,
    Verdict,
    cluster_objects,
    condition,
    served_versions,
)
from plumb.aggregator.validation.workloads import dra_claim

__all__ = [
    "dra_support",
    "gpu_health_monitor",
    "gpu_operator_health",
    "nodes_ready",
    "platform_health",
]

HEALTH_MONITORS = ("dcgm-exporter", "nvsentinel")


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
        cond = condition(n.status.conditions if n.status else None, "Ready")
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


def _is_operator(d: client.V1Deployment) -> bool:
    labels = d.metadata.labels or {}
    names = (d.metadata.name, labels.get("app"), labels.get("app.kubernetes.io/name"))
    return any(n in OPERATOR_NAMES for n in names if n)


async def gpu_operator_health(kube: Kube, check: CheckDef) -> Verdict:
    """The GPU Operator's Deployment has an available replica and every ClusterPolicy's
    status.state is `ready`; skipped where the ClusterPolicy API is not installed."""
    group, plural = CLUSTER_POLICY
    versions = await asyncio.to_thread(served_versions, kube, group)
    if not versions:
        return "skip", "no ClusterPolicy API (nvidia.com): the GPU Operator is not installed", {}
    policies = await asyncio.to_thread(cluster_objects, kube, group, versions[0], plural)
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


# -- dra-support: the API, the DeviceClass and ResourceSlices -----------------------------


async def dra_support(kube: Kube, check: CheckDef) -> Verdict:
    """The resource.k8s.io API is served, the GPU DeviceClass exists, and every GPU node has a
    ResourceSlice of the GPU DRA driver publishing at least one device."""
    driver = str(check.parameters.get("driver", "gpu.nvidia.com"))
    device_class = str(check.parameters.get("device_class", driver))
    versions = await asyncio.to_thread(served_versions, kube, DRA_GROUP)
    if not versions:
        why = f"the server does not serve {DRA_GROUP} (DRA needs Kubernetes 1.32+, GA in 1.34)"
        return "skip", why, {}
    version = versions[0]
    details = {"api": f"{DRA_GROUP}/{version}"}
    classes = await asyncio.to_thread(cluster_objects, kube, DRA_GROUP, version, "deviceclasses")
    if not any(c["metadata"]["name"] == device_class for c in classes):
        why = f"no DeviceClass {device_class}: the GPU DRA driver is not installed"
        return "skip", why, details
    slices = await asyncio.to_thread(cluster_objects, kube, DRA_GROUP, version, "resourceslices")
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
    return await dra_claim(kube, check, version, details, slices)


# -- platform-health ------------------------------------------------------------------------


def _crd_served(kube: Kube, crd: str) -> bool:
    """Whether discovery lists CRD `crd` (<plural>.<group>) in any served version: what
    clients see, with no read of CustomResourceDefinitions (no extra RBAC)."""
    plural, _, group = crd.partition(".")
    custom = client.CustomObjectsApi(kube.api)
    for version in served_versions(kube, group):
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
                        cond = condition(d.status.conditions if d.status else None, "Available")
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
