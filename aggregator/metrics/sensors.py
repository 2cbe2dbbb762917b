"""GPU sensor gauges: each streaming node's latest readings, labelled to join dcgm-exporter.

Readings are not facts (plumb/v1/facts.proto): no history, no drift, only the latest value,
and only while the node's agent streams, so a gone node's gauges vanish instead of lying.
Each GPU series carries Plumb's `node` plus dcgm-exporter's `gpu`, `UUID` and `pci_bus_id`,
and `model_name` (as plumb_gpu_info), from the node's facts, so `on (UUID)` joins the two.
A node's lines are rendered once per report (and per facts version, for the labels) and
joined at scrape, so a scrape costs a join, not a format of every sample.
"""

from __future__ import annotations

from prometheus_client.utils import floatToGoString

from plumb.aggregator.state.live import LiveState, NodeState, Sensors
from plumb.aggregator.state.replicas import Membership

__all__ = ["SensorSeries"]

# (series, help, GpuSensors field), in the order rendered.
GAUGES = (
    ("plumb_gpu_temperature_celsius", "GPU temperature.", "temperature_celsius"),
    ("plumb_gpu_power_draw_watts", "GPU power draw.", "power_draw_watts"),
    ("plumb_gpu_sm_clock_mhz", "Current SM clock of the GPU.", "sm_clock_mhz"),
    ("plumb_gpu_memory_clock_mhz", "Current memory clock of the GPU.", "memory_clock_mhz"),
    (
        "plumb_gpu_utilization_ratio",
        "Share of the last sample period a kernel ran on the GPU.",
        "gpu_utilization_ratio",
    ),
    (
        "plumb_gpu_memory_utilization_ratio",
        "Share of the last sample period the GPU's memory was read or written.",
        "memory_utilization_ratio",
    ),
    ("plumb_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_bytes"),
)
TIMESTAMP = (
    "plumb_node_sensors_timestamp_seconds",
    "When the aggregator received the node's latest sensor readings.",
)


class SensorSeries:
    """The sensor gauges of every node this process exports, as exposition text 0.0.4."""

    def __init__(self, state: LiveState, membership: Membership):
        self._state = state
        # Which nodes this process exports: with replicas, the one holding the stream.
        self._membership = membership
        self._cache: dict[str, tuple[Sensors, dict, list[str]]] = {}

    def render(self) -> bytes:
        parts: list[list[str]] = [[] for _ in range(len(GAUGES) + 1)]
        cache: dict[str, tuple[Sensors, dict, list[str]]] = {}
        for node in self._state.nodes():
            sensors = node.sensors
            if sensors is None or not self._membership.exports(node):
                continue
            held = self._cache.get(node.name)
            if held is None or held[0] is not sensors or held[1] is not node.facts:
                held = (sensors, node.facts, _node_lines(node, sensors))
            cache[node.name] = held
            for body, lines in zip(parts, held[2], strict=True):
                body.append(lines)
        self._cache = cache
        out = []
        for (name, doc, *_), body in zip((*GAUGES, TIMESTAMP), parts, strict=True):
            out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
            out.extend(body)
        return "".join(out).encode()


def _node_lines(node: NodeState, sensors: Sensors) -> list[str]:
    """One text block per gauge (GAUGES order), then the node's timestamp line."""
    by_index = {g.value("index"): g for g in node.gpus()}
    blocks: list[list[str]] = [[] for _ in GAUGES]
    for gpu in sensors.gpus:
        view = by_index.get(gpu.index)
        labels = _labels(
            {
                "node": node.name,
                "gpu": str(gpu.index),
                "UUID": (view.text("uuid") if view else None) or "",
                "pci_bus_id": (view.text("pci_bus_id") if view else None) or "",
                "model_name": (view.text("name") if view else None) or "",
            }
        )
        for block, (name, _, field) in zip(blocks, GAUGES, strict=True):
            value = getattr(gpu, field)
            if value is not None:
                block.append(f"{name}{{{labels}}} {floatToGoString(value)}\n")
    at = floatToGoString(sensors.at.timestamp())
    stamp = f'{TIMESTAMP[0]}{{node="{_esc(node.name)}"}} {at}\n'
    return ["".join(b) for b in blocks] + [stamp]


def _labels(labels: dict[str, str]) -> str:
    """Labels sorted by name, as prometheus_client writes them."""
    return ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(labels.items()))


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
