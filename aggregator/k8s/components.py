"""Component discovery: which GPU stack components run in the cluster, and at which versions.

The agents see the driver; only the cluster's workloads show the other components (the GPU
Operator and its operands, NFD, the schedulers, operators and controllers the recipes install).
Their versions come from the images of DaemonSets and Deployments, matched against
recipes/knowledge/component_images.yaml,
and from the GPU Operator's ClusterPolicy when that CRD is installed (what it is told to
deploy, for operands whose pods are not up yet). A running image wins over the ClusterPolicy.
Several versions of one component (a rollout, two installs) are reported together, which
never equals the recipe's one version, so drift shows them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from plumb.aggregator.recipes.catalog import Catalog
from plumb.aggregator.recipes.schema import ComponentImageRow
from plumb.facts import Reading

log = logging.getLogger(__name__)

# The GPU Operator's ClusterPolicy (NVIDIA/gpu-operator api/nvidia/v1): cluster-scoped.
CLUSTER_POLICY = ("nvidia.com", "v1", "clusterpolicies")
_TIMEOUT_S = 30


@dataclass(frozen=True)
class Found:
    """One component version and where it was seen (`DaemonSet ns/name`, `ClusterPolicy x`)."""

    component: str
    version: str
    seen_in: str


def fact_path(component: str) -> str:
    """The fact a component's version is reported as; drift.yaml's rules name the same paths."""
    return f"cluster.components.{component.replace('-', '_')}.version"


def split_image(image: str) -> tuple[str, str]:
    """(repository without registry host, tag) of an image reference; the digest is dropped."""
    name = image.split("@", 1)[0]
    repo, tag = name, ""
    if ":" in name.rsplit("/", 1)[-1]:
        repo, tag = name.rsplit(":", 1)
    first, _, rest = repo.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        repo = rest  # the first part is a registry host
    return repo, tag


def match_image(image: str, rows: Iterable[ComponentImageRow]) -> tuple[str, str] | None:
    """(component, version) an image shows, or None when no row knows it or its tag."""
    repo, tag = split_image(image)
    for row in rows:
        if any(repo == known or repo.endswith("/" + known) for known in row.images):
            match = re.match(row.version_pattern, tag)
            return (row.component, match.group(1)) if match else None
    return None


def from_workloads(items: Iterable[Mapping[str, Any]], rows: tuple[ComponentImageRow, ...]):
    """Found components in DaemonSets/Deployments given as API JSON dicts."""
    for item in items:
        meta = item.get("metadata") or {}
        where = f"{item.get('kind', 'workload')} {meta.get('namespace')}/{meta.get('name')}"
        pod = ((item.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or ():
            found = match_image(container.get("image") or "", rows)
            if found is not None:
                yield Found(found[0], found[1], where)


def from_cluster_policies(items: Iterable[Mapping[str, Any]], catalog: Catalog) -> Iterable[Found]:
    """Operand versions a ClusterPolicy sets (`spec.<registry values_key>.version`)."""
    rows = {r.component: r for r in catalog.component_images}
    for item in items:
        spec = item.get("spec") or {}
        where = f"ClusterPolicy {(item.get('metadata') or {}).get('name')}"
        for name, component in catalog.registry.items():
            row = rows.get(name)
            if row is None or not component.values_key:
                continue
            version = str((spec.get(component.values_key) or {}).get("version") or "")
            match = re.match(row.version_pattern, version)
            if match:
                yield Found(name, match.group(1), where)


def component_facts(found: Iterable[Found]) -> dict[str, Reading]:
    """One fact per component: its version, or its distinct versions joined by ", "."""
    running: dict[str, set[str]] = {}
    configured: dict[str, set[str]] = {}
    for f in found:
        target = configured if f.seen_in.startswith("ClusterPolicy") else running
        target.setdefault(f.component, set()).add(f.version)
    versions = {**configured, **running}
    return {fact_path(c): Reading.ok(", ".join(sorted(v))) for c, v in sorted(versions.items())}


def discover(api: client.ApiClient, catalog: Catalog) -> dict[str, Reading]:
    """The component facts of the cluster now (blocking: run it in a thread)."""
    apps = client.AppsV1Api(api)
    items: list[dict] = []
    for kind, lister in (
        ("DaemonSet", apps.list_daemon_set_for_all_namespaces),
        ("Deployment", apps.list_deployment_for_all_namespaces),
    ):
        body = api.sanitize_for_serialization(lister(_request_timeout=_TIMEOUT_S))
        items += [{**i, "kind": kind} for i in body.get("items") or ()]
    found = list(from_workloads(items, catalog.component_images))
    try:
        policies = client.CustomObjectsApi(api).list_cluster_custom_object(
            *CLUSTER_POLICY, _request_timeout=_TIMEOUT_S
        )
        found += from_cluster_policies(policies.get("items") or (), catalog)
    except client.ApiException as exc:
        if exc.status != 404:  # 404: the GPU Operator's CRD is not installed
            raise
    return component_facts(found)
