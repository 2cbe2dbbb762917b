"""The node as recipes see it: plainly named facts drawn from the agent's flat facts.

Recipes and knowledge rules say ``driver.version`` or ``k8s.version`` rather than the wire
paths (``driver.driver_version``, ``host.kubelet_version``). A fact over repeated entries
(``gpu.product``, ``cuda.runtime_version``) holds its distinct values, sorted, so eight
identical GPUs and one look the same, and the view doubles as the resolution cache key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from plumb.aggregator.state.shape import shape
from plumb.aggregator.state.views import gpu_views
from plumb.facts import Reading

__all__ = ["FACT_NAMES", "GpuIdentity", "NodeView", "normalize_pci_device_id"]

_SINGLE = {
    "driver.version": "driver.driver_version",
    "driver.kernel_module": "driver.kernel_module_flavour",
    # /proc/driver/nvidia/version: the loaded kernel module, beside NVML's library version.
    "driver.kernel_module_version": "driver.kernel_module_version",
    "cuda.driver_version": "driver.cuda_driver_version",
    "cuda.toolkit_version": "cuda.cuda_toolkit_version",
    "fabric_manager.version": "driver.fabric_manager_version",
    "k8s.version": "host.kubelet_version",
    "kernel.version": "host.kernel",
    "os.id": "host.os_id",
    "os.version": "host.os_version_id",
    "cloud.provider": "host.cloud_provider",
    "cloud.instance_type": "host.instance_type",
    "container_runtime.name": "host.container_runtime",
    "container_runtime.version": "host.container_runtime_version",
    # Component discovery (aggregator/k8s/components.py): the GPU Operator runs in the cluster.
    "gpu_operator.version": "cluster.components.gpu_operator.version",
}
_MULTI = {
    "cuda.runtime_version": ("cuda.runtimes", "version"),
    "nccl.version": ("nccl.libraries", "version"),
    "gpu.product": ("gpus", "name"),
    "gpu.pci_device_id": ("gpus", "pci_device_id"),
    "gpu.mig_enabled": ("gpus", "mig_mode_current"),
    # NVML's fabric state (Hopper and later): `N/A` unless the GPU is attached to NVSwitches.
    "gpu.fabric_state": ("gpus", "fabric_state"),
    # NVLink links each GPU has (up or not): 0 or not_supported on a PCIe-only GPU.
    "gpu.nvlink_links_total": ("gpus", "nvlink_links_total"),
}
# Node labels the view reads, by the name of the view fact.
_LABELS = {
    # The GPU Operator's label: `false` keeps its driver off the node; its driver container
    # sets `pre-installed` when it finds a driver on the host and steps aside.
    "gpu_operator.driver_deploy": "nvidia.com/gpu.deploy.driver",
}
# gpu.unknown: "NAME (PCI device ID)" of each GPU the catalog does not know.
_DERIVED = ("gpu.count", "gpu.model", "gpu.accelerator", "gpu.unknown")
FACT_NAMES = frozenset(_SINGLE) | frozenset(_MULTI) | frozenset(_LABELS) | frozenset(_DERIVED)

# (model, accelerator) of a GPU from its NVML name and PCI device id, None when unknown.
GpuIdentity = Callable[[str | None, str | None], tuple[str, str] | None]


def normalize_pci_device_id(raw: str) -> str:
    """``2330`` from ``0x2330``, ``10de:2330`` or NVML's combined ``0x233010DE``."""
    text = raw.strip().lower().removeprefix("0x")
    if ":" in text:
        text = text.split(":")[-1]
    return text[:4] if len(text) == 8 else text


# The repeated entries' leaves a view reads (GPUs come from their views); a node's other few
# hundred paths are skipped.
_WANTED = frozenset(v for v in _MULTI.values() if v[0] != "gpus") | {
    ("cluster.labels", "name"),
    ("cluster.labels", "value"),
}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class NodeView:
    """Plain fact name → its values (one for a single fact), plus the non-ok statuses."""

    values: Mapping[str, tuple[str, ...]]
    statuses: Mapping[str, str]

    @classmethod
    def from_facts(
        cls, facts: Mapping[str, Reading], identify: GpuIdentity | None = None
    ) -> NodeView:
        """The view of ``facts``; ``identify`` resolves GPU model and accelerator keys."""
        values: dict[str, tuple[str, ...]] = {}
        statuses: dict[str, str] = {}
        for name, path in _SINGLE.items():
            reading = facts.get(path)
            if reading is None:
                continue
            if reading.status == "ok" and reading.value is not None:
                values[name] = (_text(reading.value),)
            else:
                statuses[name] = reading.status
        repeated: dict[str, dict[int, dict[str, str]]] = {}
        for path, prefix, index, leaf in shape(facts).entries(_WANTED):
            reading = facts[path]
            if reading.status == "ok" and reading.value is not None:
                repeated.setdefault(prefix, {}).setdefault(index, {})[leaf] = _text(reading.value)
        gpus = gpu_views(facts)
        for name, (prefix, leaf) in _MULTI.items():
            if prefix == "gpus":
                found = {_text(v) for g in gpus if (v := g.value(leaf)) is not None}
            else:
                found = {e[leaf] for e in repeated.get(prefix, {}).values() if leaf in e}
            if found:
                values[name] = tuple(sorted(found))
        if gpus:
            values["gpu.count"] = (str(len(gpus)),)
        labels = {
            e.get("name"): e.get("value") for e in repeated.get("cluster.labels", {}).values()
        }
        for name, label in _LABELS.items():
            if labels.get(label) is not None:
                values[name] = (labels[label],)  # type: ignore[assignment]
        if identify is not None and gpus:
            ids, unknown = set(), set()
            for g in gpus:
                name, pci = g.text("name"), g.text("pci_device_id")
                found = identify(name, pci)
                if found is not None:
                    ids.add(found)
                elif name or pci:
                    shown = f"0x{normalize_pci_device_id(pci)}" if pci else "unknown"
                    unknown.add(f"{name or 'unnamed GPU'} (PCI device {shown})")
            if ids:
                values["gpu.model"] = tuple(sorted({m for m, _ in ids}))
                values["gpu.accelerator"] = tuple(sorted({a for _, a in ids}))
            if unknown:
                values["gpu.unknown"] = tuple(sorted(unknown))
        return cls(values, statuses)

    def get(self, name: str) -> tuple[str, ...]:
        """The values of ``name``; empty when the node did not report it."""
        return self.values.get(name, ())

    def one(self, name: str) -> str | None:
        """The single value of ``name``, or None."""
        found = self.values.get(name)
        return found[0] if found else None

    def status(self, name: str) -> str:
        """``ok``, ``missing``, or the reading's ``not_supported`` / ``error`` status."""
        if name in self.values:
            return "ok"
        return self.statuses.get(name, "missing")

    def key(self) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, str], ...]]:
        """A hashable, order-independent form of the view, for caching resolutions."""
        return tuple(sorted(self.values.items())), tuple(sorted(self.statuses.items()))
