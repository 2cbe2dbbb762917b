"""AICR documents as Plumb criteria: a `RecipeCriteria` file or body, and a `Snapshot`.

`criteria_from_snapshot` is what `aicr recipe -s` does (AICR pkg/recipe
ExtractCriteriaFromSnapshot, pkg/fingerprint FromMeasurements): service from `K8s.node.provider`
(then `K8s.server.service`, the node's providerID scheme, and last the `-eks-`/`-gke`/`-aks`
marks of `K8s.server.version`), accelerator from the GPU (the cluster-wide
`nvidia.com/gpu.product` label, then `GPU.hardware.model`, then `GPU.smi` `gpu.model`), os from
`OS.release.ID`. Intent and platform are choices, not facts: no snapshot carries them, so they
come from the caller. GPU names go through Plumb's catalog, not AICR's substring table, so a GPU
the catalog does not know is named in a warning rather than resolved silently as `any`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.recipes import Catalog, Criteria, Resolution, ResolutionCache
from plumb.aggregator.untrusted import check_tree

__all__ = [
    "CRITERIA_KINDS",
    "SNAPSHOT_API_VERSIONS",
    "SnapshotCriteria",
    "criteria_from_recipe_criteria",
    "criteria_from_snapshot",
    "resolve_snapshot",
]

# Both the current group and the one AICR v0.11 wrote, so older files still load.
_API_VERSIONS = ("aicr.run/v1alpha2", "aicr.nvidia.com/v1alpha1")
# A Snapshot may also come from AICR's predecessor, Cloud Native Stack (same shape).
SNAPSHOT_API_VERSIONS = (*_API_VERSIONS, "cns.nvidia.com/v1alpha1")
CRITERIA_KINDS = ("service", "accelerator", "os", "intent", "platform")
# AICR's aliases (pkg/recipe/criteria.go): `gpu` for accelerator, self-managed services as any.
_SERVICE_ALIASES = {"self-managed": "any", "self": "any", "vanilla": "any", "": "any"}
_OS_ALIASES = {"al2": "amazonlinux", "al2023": "amazonlinux", "": "any"}
# How a managed service marks its Kubernetes version (AICR's ExtractCriteriaFromSnapshot).
_SERVER_VERSION_MARKS = (("-eks-", "eks"), ("-gke", "gke"), ("-aks", "aks"))
_GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by GPU Feature Discovery on every GPU node
_HINT = "an AICR snapshot is what `aicr snapshot` writes: kind Snapshot, measurements[]"


def criteria_from_recipe_criteria(doc: object) -> dict[str, str | int]:
    """Plumb criteria from an AICR `RecipeCriteria` document (already parsed from YAML/JSON).

    Accepts `spec.gpu` for `spec.accelerator` and AICR's aliases; unset dimensions are `any`.
    Raises InvalidInput naming what is wrong; unknown values are left to the resolver,
    which names the allowed ones.
    """
    if not isinstance(doc, dict):
        raise InvalidInput("a RecipeCriteria file must be a YAML mapping")
    if doc.get("kind") != "RecipeCriteria":
        raise InvalidInput(
            f"expected kind RecipeCriteria, got {doc.get('kind')!r}",
            hint="an AICR criteria file starts with `kind: RecipeCriteria`",
        )
    api_version = doc.get("apiVersion")
    if api_version is not None and api_version not in _API_VERSIONS:
        raise InvalidInput(
            f"unsupported apiVersion {api_version!r}", hint=f"one of {', '.join(_API_VERSIONS)}"
        )
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise InvalidInput("RecipeCriteria spec must be a mapping")
    spec = dict(spec)
    if "gpu" in spec:
        if "accelerator" in spec and spec["accelerator"] != spec["gpu"]:
            raise InvalidInput("spec.gpu and spec.accelerator disagree; give one")
        spec["accelerator"] = spec.pop("gpu")
    unknown = sorted(set(spec) - {*CRITERIA_KINDS, "nodes"})
    if unknown:
        raise InvalidInput(
            f"unknown RecipeCriteria field(s): {', '.join('spec.' + k for k in unknown)}",
            hint=f"known: {', '.join(CRITERIA_KINDS)}, nodes",
        )
    out: dict[str, str | int] = {}
    for key in CRITERIA_KINDS:
        value = spec.get(key)
        text = "" if value is None else str(value).strip().lower()
        if key == "service":
            text = _SERVICE_ALIASES.get(text, text)
        elif key == "os":
            text = _OS_ALIASES.get(text, text)
        out[key] = text or "any"
    nodes = spec.get("nodes", 0) or 0
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 0:
        raise InvalidInput(f"spec.nodes must be a whole number >= 0, got {nodes!r}")
    out["nodes"] = nodes
    return out


@dataclass(frozen=True)
class SnapshotCriteria:
    """What a snapshot implies: criteria, where each came from, and what could not be told."""

    criteria: Criteria
    sources: Mapping[str, str]  # dimension -> the snapshot key it was read from
    warnings: tuple[str, ...]
    source_node: str | None


def criteria_from_snapshot(doc: object, catalog: Catalog) -> SnapshotCriteria:
    """The criteria an AICR Snapshot implies; InvalidInput names what is malformed."""
    check_tree(doc)
    data, source_node = _measurements(doc)
    allowed = catalog.allowed_values()
    sources: dict[str, str] = {}
    warnings: list[str] = []

    service = _service(data, catalog, allowed["service"], sources, warnings)
    accelerator = _accelerator(data, catalog, allowed["accelerator"], sources, warnings)
    os_id = _text(data, "OS", "release", "ID")
    os_value = "any"
    if os_id:
        key = os_id.strip().lower()
        os_value = catalog.criteria.os_by_id.get(key) or (key if key in allowed["os"] else "any")
        if os_value == "any":
            warnings.append(f"OS.release.ID {os_id!r} is no os the recipes know; os is any")
        else:
            sources["os"] = "OS.release.ID"
    criteria = Criteria(service=service, accelerator=accelerator, os=os_value)
    return SnapshotCriteria(criteria, sources, tuple(warnings), source_node)


def resolve_snapshot(
    recipes: ResolutionCache, doc: object, overrides: Mapping[str, str | int]
) -> Resolution:
    """The recipe for a snapshot's criteria, each `overrides` value other than `any` (or 0
    nodes) winning; the snapshot's warnings join the recipe's."""
    found = criteria_from_snapshot(doc, recipes.catalog)
    chosen = {k: v for k, v in overrides.items() if v not in ("any", 0, None)}
    resolution = recipes.resolve(replace(found.criteria, **chosen))
    if not found.warnings:
        return resolution
    return replace(resolution, warnings=resolution.warnings + found.warnings)


Data = dict[tuple[str, str], Mapping[str, Any]]


def _measurements(doc: object) -> tuple[Data, str | None]:
    """{(type, subtype): data} of a Snapshot, and the node it was taken on."""
    if not isinstance(doc, dict):
        raise InvalidInput("an AICR snapshot must be a mapping", hint=_HINT)
    if doc.get("kind") != "Snapshot":
        raise InvalidInput(f"expected kind Snapshot, got {doc.get('kind')!r}", hint=_HINT)
    if doc.get("apiVersion") not in SNAPSHOT_API_VERSIONS:
        raise InvalidInput(
            f"unsupported Snapshot apiVersion {doc.get('apiVersion')!r}",
            hint=f"one of {', '.join(SNAPSHOT_API_VERSIONS)}",
        )
    metadata = doc.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("Snapshot metadata must be a mapping", hint=_HINT)
    measurements = doc.get("measurements")
    if not isinstance(measurements, list):
        raise InvalidInput("Snapshot measurements must be a list", hint=_HINT)
    out: Data = {}
    for i, m in enumerate(measurements):
        where = f"measurements[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("type"), str):
            raise InvalidInput(f"{where} must be a mapping with a type", hint=_HINT)
        subtypes = m.get("subtypes") or []
        if not isinstance(subtypes, list):
            raise InvalidInput(f"{where}.subtypes must be a list", hint=_HINT)
        for j, sub in enumerate(subtypes):
            if not isinstance(sub, dict) or not isinstance(sub.get("subtype"), str):
                raise InvalidInput(f"{where}.subtypes[{j}] must name its subtype", hint=_HINT)
            data = sub.get("data")
            data = {} if data is None else data
            if not isinstance(data, dict):
                raise InvalidInput(f"{where}.subtypes[{j}].data must be a mapping", hint=_HINT)
            out[(m["type"], sub["subtype"])] = data
    node = metadata.get("source-node") or metadata.get("source")
    return out, node if isinstance(node, str) else None


def _text(data: Data, kind: str, subtype: str, key: str) -> str | None:
    """A scalar reading as text; None when absent or not a scalar."""
    value = data.get((kind, subtype), {}).get(key)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)


def _service(
    data: Data,
    catalog: Catalog,
    allowed: tuple[str, ...],
    sources: dict[str, str],
    warnings: list[str],
) -> str:
    by_provider = catalog.criteria.service_by_provider
    provider_id = _text(data, "K8s", "node", "provider-id") or ""
    version = _text(data, "K8s", "server", "version") or ""
    candidates = [
        ("K8s.node.provider", _text(data, "K8s", "node", "provider")),
        ("K8s.server.service", _text(data, "K8s", "server", "service")),
        ("K8s.node.provider-id", provider_id.split("://")[0] if "://" in provider_id else None),
        (
            "K8s.server.version",
            next((svc for mark, svc in _SERVER_VERSION_MARKS if mark in version), None),
        ),
    ]
    for source, raw in candidates:
        if not raw:
            continue
        key = raw.strip().lower()
        # OKE nodes report a bare OCID, and older snapshots the scheme `oci` (AICR fingerprint).
        key = "oci" if key.startswith("ocid1.") else key
        value = key if key in allowed else by_provider.get(key)
        if value and value != "any":
            sources["service"] = source
            return value
        warnings.append(f"{source} {raw!r} is no service the recipes know")
    return "any"


def _accelerator(
    data: Data,
    catalog: Catalog,
    allowed: tuple[str, ...],
    sources: dict[str, str],
    warnings: list[str],
) -> str:
    labels = data.get(("NodeTopology", "label"), {})
    products = sorted(k for k in labels if k.startswith(_GPU_PRODUCT_LABEL + "."))
    if len(products) > 1:
        warnings.append(f"several GPU products ({_GPU_PRODUCT_LABEL}): accelerator is any")
        return "any"
    label = _text(data, "NodeTopology", "label", _GPU_PRODUCT_LABEL)
    if label:
        product = label.split("|")[0]  # "<value>|<node1,node2>"
        row = _by_label(catalog, product)
        if row is not None:
            sources["accelerator"] = f"NodeTopology.label.{_GPU_PRODUCT_LABEL}"
            return row
        warnings.append(_unknown(product))
    model = _text(data, "GPU", "hardware", "model")
    if model:
        if model.lower() in allowed and model.lower() != "any":
            sources["accelerator"] = "GPU.hardware.model"
            return model.lower()
        warnings.append(f"GPU.hardware.model {model!r} is no accelerator the recipes know")
    for subtype in ("smi", "device"):
        name = _text(data, "GPU", subtype, "gpu.model")
        if not name:
            continue
        found = catalog.identify_gpu(name, None)
        if found is not None:
            sources["accelerator"] = f"GPU.{subtype}.gpu.model"
            return found.accelerator
        warnings.append(_unknown(name))
    return "any"


def _by_label(catalog: Catalog, product: str) -> str | None:
    """The accelerator of a GPU Feature Discovery product label (the name, spaces as `-`)."""
    wanted = product.strip().lower()
    for row in catalog.gpus:
        if any(n.lower().replace(" ", "-") == wanted for n in row.nvml_names):
            return row.accelerator
    return None


def _unknown(name: str) -> str:
    return f"unknown GPU {name}: not in the GPU catalog, so no accelerator overlay applies"
