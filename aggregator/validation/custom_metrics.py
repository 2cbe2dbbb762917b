"""`custom-metrics-api`: the custom metrics API serves the GPU metrics an HPA scales on.

The other half of AICR's `ai-service-metrics` (prometheus.py has the first: Prometheus holds
the DCGM series). prometheus-adapter, which the recipes deploy, registers the APIService
v1beta1.custom.metrics.k8s.io; the check wants it Available, wants its discovery document (an
APIResourceList, one `<resource>/<metric>` entry per metric and object kind it can describe)
to list every metric of the check's `metrics` for one of its `resources`, and wants a read of
that metric for all such objects (`<resource>/*/<metric>`, in `namespace` for namespaced
ones) to return at least one value. AICR only asks for the group's discovery document. The
adapter relists Prometheus every 30 s by default, so what is not there yet is asked for again
every `poll_s` until `window_s` has passed. A server that does not serve the group is a skip:
no adapter is installed. The synchronous `kubernetes` client runs in threads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client

from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.validation.kube import Kube, Verdict

__all__ = ["APISERVICE", "GROUP", "VERSION", "custom_metrics_api"]

GROUP = "custom.metrics.k8s.io"
VERSION = "v1beta1"  # the version prometheus-adapter's chart registers and the HPA reads
APISERVICE = f"{VERSION}.{GROUP}"
BASE = f"/apis/{GROUP}/{VERSION}"
REQUEST_TIMEOUT_S = 10.0  # the apiserver proxies to the adapter, which asks Prometheus


def _names(value: object) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _get(kube: Kube, path: str) -> Any:
    """GET `path` of the API server as JSON, with the client's credentials."""
    request = kube.api.param_serialize(
        "GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
    )
    response = kube.api.call_api(*request, _request_timeout=REQUEST_TIMEOUT_S)
    response.read()
    return kube.api.response_deserialize(response, {"2XX": "object"}).data


def _served(kube: Kube) -> bool:
    """Whether the server lists VERSION of GROUP (an APIService registers it, even when that
    APIService is not Available)."""
    for g in client.ApisApi(kube.api).get_api_versions().groups:
        if g.name == GROUP:
            return any(v.version == VERSION for v in g.versions)
    return False


def _available(kube: Kube) -> Any | None:
    """The APIService's Available condition, or None when it has none yet."""
    service = client.ApiregistrationV1Api(kube.api).read_api_service(APISERVICE)
    conditions = (service.status.conditions if service.status else None) or ()
    return next((c for c in conditions if c.type == "Available"), None)


def _listed(kube: Kube, metrics: list[str], resources: list[str]) -> dict[str, tuple[str, bool]]:
    """Each metric the discovery document lists, with the first of `resources` it is listed
    for and whether that resource is namespaced."""
    entries = {
        r["name"]: bool(r.get("namespaced")) for r in _get(kube, BASE).get("resources") or ()
    }
    found = {}
    for metric in metrics:
        for resource in resources:
            if f"{resource}/{metric}" in entries:
                found[metric] = (resource, entries[f"{resource}/{metric}"])
                break
    return found


def _values(kube: Kube, metric: str, resource: str, namespaced: bool, namespace: str) -> str:
    """'' when the API serves values of `metric` for the `resource` objects, else why not."""
    scope = f"{BASE}/namespaces/{namespace}" if namespaced else BASE
    where = f"{resource} in {namespace}" if namespaced else resource
    try:
        items = _get(kube, f"{scope}/{resource}/*/{metric}").get("items") or ()
    except client.ApiException as exc:
        return f"{metric} for {where}: {exc.status} {exc.reason}"
    return "" if items else f"{metric} for {where}: no values"


async def custom_metrics_api(kube: Kube, check: CheckDef) -> Verdict:
    """APIService v1beta1.custom.metrics.k8s.io is Available and serves values of every
    metric of the check; skipped where the group is not served."""
    metrics = _names(check.parameters["metrics"])
    resources = _names(check.parameters.get("resources", "pods,nodes"))
    namespace = str(check.parameters.get("namespace", "gpu-operator"))
    window_s = float(check.parameters.get("window_s", 0))
    poll_s = float(check.parameters.get("poll_s", 10))
    if not await asyncio.to_thread(_served, kube):
        why = f"the server does not serve {GROUP}/{VERSION}: no custom metrics adapter installed"
        return "skip", why, {}
    details = {"apiservice": APISERVICE}
    available = await asyncio.to_thread(_available, kube)
    if available is None or available.status != "True":
        why = (
            f"{available.reason}: {available.message}"
            if available is not None
            else "no Available condition yet"
        )
        details["available"] = why
        return "fail", f"APIService {APISERVICE} is not Available: {why}", details
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window_s
    while True:
        listed = await asyncio.to_thread(_listed, kube, metrics, resources)
        unlisted = [m for m in metrics if m not in listed]
        empty = []
        for metric, (resource, namespaced) in listed.items():
            why = await asyncio.to_thread(_values, kube, metric, resource, namespaced, namespace)
            if why:
                empty.append(why)
        if not (unlisted or empty) or loop.time() + poll_s > deadline:
            break
        await asyncio.sleep(poll_s)
    details.update({f"metric.{m}": r for m, (r, _) in listed.items()})
    problems = []
    if unlisted:
        details["unlisted"] = ",".join(unlisted)
        problems.append(
            f"{BASE} lists no {' or '.join(resources)} metric named {', '.join(unlisted)}"
            " (the adapter's rules do not expose it)"
        )
    if empty:
        problems.append("no values served: " + "; ".join(empty))
    if problems:
        return "fail", "; ".join(problems), details
    served = ", ".join(f"{m} for {r}" for m, (r, _) in listed.items())
    return "pass", f"APIService {APISERVICE} Available; serves {served}", details
