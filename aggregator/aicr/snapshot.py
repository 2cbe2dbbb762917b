"""Plumb's facts as an NVIDIA AICR Snapshot, the document `aicr snapshot` writes.

Teams that already run AICR can point their tooling at Plumb: `snapshot` writes one node's live
facts in AICR's Snapshot shape (kind Snapshot; measurements K8s, GPU, OS, SystemD,
NodeTopology, each a list of subtypes with scalar `data`), with AICR's key names and
nvidia-smi's / systemd's spellings of values (`Enabled`, `Hopper`, `HMM`, `active`).

What Plumb does not collect is left out rather than invented: `K8s.image`, `K8s.policy`,
`NodeTopology.taint/label`, most os-release keys, most of each unit's D-Bus properties, and
every sysctl outside Plumb's documented subset (agent/collect/kernel.py). `K8s.server.version`
is the node's kubelet version, the version Plumb's own `k8s.version` constraints read. Beside
AICR's `GPU.hardware` and `GPU.smi` (first GPU only, as AICR did), `GPU.devices` carries one
item per GPU, which AICR's item entries allow and AICR itself never collected.
tests/unit/aicr/test_aicr_real_snapshot.py compares the key sets with a real snapshot.

Pure: no I/O, no transport; the core passes facts in and serialises what comes out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from plumb.aggregator.state.views import gpu_views
from plumb.facts import Reading

__all__ = ["API_VERSION", "snapshot"]

API_VERSION = "aicr.run/v1alpha2"
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "amd64": "amd64", "arm64": "arm64"}
# NVML's architecture names as nvidia-smi spells them where capitalising is not enough.
_ARCH_NAMES = {"ada": "Ada Lovelace"}
_ADDRESSING = {"hmm": "HMM", "ats": "ATS", "none": "None"}
_ROW = re.compile(r"^(.+)\[(\d+)\]\.([^.\[\]]+)$")

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
                    "gpu.product-architecture": _architecture(first.get("architecture")),
                    "gpu.persistence-mode": _on_off(first.get("persistence_mode")),
                    "gpu.addressing-mode": _ADDRESSING.get(str(first.get("addressing_mode"))),
                    "gpu.vbios-version": first.get("vbios_version"),
                    "gpu.gsp-firmware-version": first.get("gsp_firmware_version"),
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
    measurements = [
        {"type": "K8s", "subtypes": k8s},
        {"type": "GPU", "subtypes": gpu},
        {"type": "OS", "subtypes": _os(facts, pretty, kernel)},
    ]
    units = _rows(facts, "host.systemd_units")
    if units:
        measurements.append({"type": "SystemD", "subtypes": [_unit(u) for u in units]})
    measurements.append(
        {"type": "NodeTopology", "subtypes": [_subtype("summary", {"node-count": node_count})]}
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "Snapshot",
        "metadata": {
            "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "version": version,
            "source-node": node,
            # What AICR's predecessor (and AICR before source-node) named the node.
            "source": node,
        },
        "measurements": measurements,
    }


def _rows(facts: Mapping[str, Reading], prefix: str) -> list[dict[str, Scalar]]:
    """The ok leaves of each `prefix[i].leaf` fact, by index."""
    rows: dict[int, dict[str, Scalar]] = {}
    for path, reading in facts.items():
        if not path.startswith(prefix) or reading.status != "ok" or reading.value is None:
            continue
        match = _ROW.match(path)
        if match and match.group(1) == prefix:
            rows.setdefault(int(match.group(2)), {})[match.group(3)] = reading.value
    return [rows[i] for i in sorted(rows)]


def _os(facts: Mapping[str, Reading], pretty: Scalar | None, kernel: Scalar | None) -> list:
    """OS.release, and OS.grub, OS.kmod and OS.sysctl where the node reported them."""
    out = [
        _subtype(
            "release",
            _data(
                ID=_ok(facts, "host.os_id"),
                VERSION_ID=_ok(facts, "host.os_version_id"),
                PRETTY_NAME=pretty,
            ),
        )
    ]
    cmdline = _ok(facts, "host.kernel_cmdline")
    if isinstance(cmdline, str):
        # AICR's tokens: `key=value`, a bare flag as "", the root device left out.
        tokens = (t.partition("=") for t in cmdline.split())
        grub = {k: v for k, _, v in tokens if k != "root"}
        out.append(_subtype("grub", dict(sorted(grub.items()))))
    modules = _ok(facts, "host.kernel_modules")
    if isinstance(modules, str):
        out.append(_subtype("kmod", dict.fromkeys(sorted(modules.split()), True)))
    sysctl: dict[str, Scalar] = {}
    if kernel is not None:
        # What AICR's `OS.sysctl./proc/sys/kernel/osrelease >= 6.8` constraints read.
        sysctl["/proc/sys/kernel/osrelease"] = kernel
    for row in _rows(facts, "host.sysctls"):
        if "name" in row and "value" in row:
            sysctl["/proc/sys/" + str(row["name"]).replace(".", "/")] = str(row["value"])
    if sysctl:
        out.append(_subtype("sysctl", dict(sorted(sysctl.items()))))
    return out


def _unit(row: Mapping[str, Scalar]) -> dict[str, Any]:
    """A systemd unit as AICR's SystemD subtype: the D-Bus properties Plumb's files tell.

    A unit without a unit file is systemd's `not-found` (inactive, dead, empty paths); a unit
    that is not running reads `inactive`, since a stopped and a failed unit look alike from
    the files.
    """
    found = "fragment_path" in row
    running = row.get("running") is True
    data = {
        "LoadState": "loaded" if found else "not-found",
        "FragmentPath": row.get("fragment_path", ""),
        "UnitFileState": row.get("unit_file_state", ""),
        "ActiveState": "active" if running else "inactive",
        "SubState": "running" if running else "dead",
    }
    return _subtype(str(row["name"]), dict(sorted(data.items())))


def _architecture(name: Scalar | None) -> str | None:
    if name is None or name == "unknown":
        return None
    text = str(name)
    return _ARCH_NAMES.get(text, text.capitalize())


def _on_off(value: Scalar | None) -> str | None:
    """nvidia-smi's `Enabled`/`Disabled`, as AICR's GPU.smi held them."""
    if value is None:
        return None
    return "Enabled" if value else "Disabled"
