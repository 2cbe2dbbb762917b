"""NVIDIA AICR interoperability: Plumb's facts as AICR Snapshots, AICR criteria files as ours.

Teams that already run AICR (`aicr snapshot`, `aicr recipe -c`) can point their tooling at
Plumb: `snapshot` writes one node's live facts in AICR's Snapshot shape (kind Snapshot,
measurements K8s / GPU / OS / NodeTopology, each a list of subtypes with scalar `data`), and
`criteria_from_recipe_criteria` reads AICR's `RecipeCriteria` document into Plumb criteria.

What Plumb does not collect is left out rather than invented: `K8s.image`, `K8s.policy`,
`OS.grub`, `OS.kmod`, `SystemD.*`, `NodeTopology.taint/label`. `K8s.server.version` is the
node's kubelet version, the version Plumb's own `k8s.version` constraints read. Beside AICR's
`GPU.hardware` and `GPU.smi` (first GPU only, as AICR did), `GPU.devices` carries one item per
GPU, which AICR's item entries allow and AICR itself never collected.

Pure: no I/O, no transport; the core passes facts in and serialises what comes out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.state.views import gpu_views
from plumb.facts import Reading

__all__ = [
    "API_VERSION",
    "CRITERIA_KINDS",
    "criteria_from_recipe_criteria",
    "snapshot",
]

API_VERSION = "aicr.run/v1alpha2"
# Both the current group and the one AICR v0.11 wrote, so older files still load.
_API_VERSIONS = ("aicr.run/v1alpha2", "aicr.nvidia.com/v1alpha1")
CRITERIA_KINDS = ("service", "accelerator", "os", "intent", "platform")
# AICR's aliases (pkg/recipe/criteria.go): `gpu` for accelerator, self-managed services as any.
_SERVICE_ALIASES = {"self-managed": "any", "self": "any", "vanilla": "any", "": "any"}
_OS_ALIASES = {"al2": "amazonlinux", "al2023": "amazonlinux", "": "any"}
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "amd64": "amd64", "arm64": "arm64"}

Scalar = str | int | float | bool


def _ok(facts: Mapping[str, Reading], path: str) -> Scalar | None:
    reading = facts.get(path)
    return reading.value if reading is not None and reading.status == "ok" else None


def _data(**pairs: Scalar | None) -> dict[str, Scalar]:
    """AICR `data`: only readings that exist (AICR's collectors also skip what they lack)."""
    return {k: v for k, v in pairs.items() if v is not None}


def _subtype(name: str, data: dict[str, Scalar], items: list | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"subtype": name, "data": data}
    if items:
        out["items"] = items
    return out


def _gpus(facts: Mapping[str, Reading]) -> list[dict[str, Scalar]]:
    """Per-GPU ok readings, by index."""
    return [
        {leaf: v for leaf in g.readings if (v := g.value(leaf)) is not None}
        for g in gpu_views(facts)
    ]


def snapshot(
    node: str,
    facts: Mapping[str, Reading],
    *,
    at: datetime,
    version: str,
    service: str = "any",
    accelerator: str = "any",
    node_count: int = 1,
) -> dict[str, Any]:
    """One node's facts as an AICR Snapshot (a plain dict, ready for YAML).

    `service` and `accelerator` are the node's inferred criteria (AICR's `provider` and GPU
    `model` keys); `any` leaves the key out. `node_count` is the fleet size Plumb knows.
    """
    gpus = _gpus(facts)
    driver = _ok(facts, "driver.driver_version")
    kubelet = _ok(facts, "host.kubelet_version")
    arch = _ok(facts, "host.architecture")
    runtime = _ok(facts, "host.container_runtime")
    runtime_version = _ok(facts, "host.container_runtime_version")
    pretty = _ok(facts, "host.os_pretty_name")
    kernel = _ok(facts, "host.kernel")
    k8s = [
        _subtype(
            "server",
            _data(
                version=kubelet, platform=f"linux/{_ARCH.get(str(arch), arch)}" if arch else None
            ),
        ),
        _subtype(
            "node",
            _data(
                **{
                    "source-node": node,
                    "provider": None if service == "any" else service,
                    "container-runtime-id": (
                        f"{runtime}://{runtime_version}" if runtime and runtime_version else None
                    ),
                    "container-runtime-name": runtime,
                    "container-runtime-version": runtime_version,
                    "kubelet-version": kubelet,
                    "kernel-version": kernel,
                    "operating-system": "linux",
                    "os-image": pretty,
                }
            ),
        ),
    ]
    first = gpus[0] if gpus else {}
    products = {g.get("name") for g in gpus}
    gpu = [
        _subtype(
            "hardware",
            _data(
                **{
                    "gpu-present": bool(gpus),
                    "gpu-count": len(gpus),
                    "driver-loaded": driver is not None,
                    "detection-source": "nvml",
                    # AICR sets the SKU only when every GPU shares one.
                    "model": accelerator if accelerator != "any" and len(products) == 1 else None,
                }
            ),
        ),
        _subtype(
            "smi",
            _data(
                **{
                    "driver": driver,
                    "cuda-version": _ok(facts, "driver.cuda_driver_version"),
                    "gpu-count": len(gpus),
                    "gpu.model": first.get("name"),
                    "gpu.product-architecture": first.get("architecture"),
                    "gpu.persistence-mode": _on_off(first.get("persistence_mode")),
                    "gpu.vbios-version": first.get("vbios_version"),
                }
            ),
        ),
    ]
    if gpus:
        gpu.append(
            _subtype(
                "devices",
                {},
                [
                    {"data": {k.replace("_", "-"): g[k] for k in sorted(g)}, "context": {}}
                    for g in gpus
                ],
            )
        )
    os_release = _data(
        ID=_ok(facts, "host.os_id"),
        VERSION_ID=_ok(facts, "host.os_version_id"),
        PRETTY_NAME=pretty,
    )
    os_subtypes = [_subtype("release", os_release)]
    if kernel is not None:
        # What AICR's `OS.sysctl./proc/sys/kernel/osrelease >= 6.8` constraints read.
        os_subtypes.append(_subtype("sysctl", {"/proc/sys/kernel/osrelease": kernel}))
    measurements = [
        {"type": "K8s", "subtypes": k8s},
        {"type": "GPU", "subtypes": gpu},
        {"type": "OS", "subtypes": os_subtypes},
        {
            "type": "NodeTopology",
            "subtypes": [_subtype("summary", {"node-count": node_count})],
        },
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "Snapshot",
        "metadata": {
            "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "version": version,
            "source-node": node,
            "source": "plumb",
        },
        "measurements": measurements,
    }


def _on_off(value: Scalar | None) -> str | None:
    """nvidia-smi's `Enabled`/`Disabled`, as AICR's GPU.smi held them."""
    if value is None:
        return None
    return "Enabled" if value else "Disabled"


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
