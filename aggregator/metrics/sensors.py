"""GPU sensor series: each streaming node's latest readings, labelled to join dcgm-exporter.

Readings are not facts (plumb/v1/facts.proto): no history, no drift, only the latest value,
and only while the node's agent streams, so a gone node's series vanish instead of lying.
Each GPU series carries Plumb's `node` plus dcgm-exporter's `gpu`, `UUID` and `pci_bus_id`,
and `model_name` (as plumb_gpu_info), from the node's facts, so `on (UUID)` joins the two.
The error counts are counters (`_total`: Prometheus' rate() reads them, resets included);
the clock-event mask is one 0/1 gauge per reason, since PromQL cannot test a bit. The power
limit, a fact, is rendered here beside the draw with the same labels, so that draw / limit
divides without a join. A node's lines are rendered once per report, as it arrives (the
intake touches the node), with its GPUs' labels once per facts version, and joined at
scrape (metrics/text.py), so a scrape costs a join, not a format of every sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.utils import floatToGoString

from plumb.aggregator.metrics.text import Families, escape, label_text
from plumb.aggregator.state.live import LiveState, NodeState, Sensors
from plumb.aggregator.state.replicas import Membership
from plumb.aggregator.state.views import GpuView
from plumb.sensors import CLOCK_EVENT_REASONS, GpuSensors

__all__ = ["SensorSeries"]

# One GPU's samples of a family: (labels beyond the GPU's, value) pairs.
Samples = Callable[[GpuSensors, GpuView | None], Iterable[tuple[str, float]]]


def _reading(field: str) -> Samples:
    def samples(gpu: GpuSensors, view: GpuView | None) -> Iterable[tuple[str, float]]:
        value = getattr(gpu, field)
        return () if value is None else (("", value),)

    return samples


def _clock_events(gpu: GpuSensors, view: GpuView | None) -> Iterable[tuple[str, float]]:
    mask = gpu.clock_event_reasons
    if mask is None:
        return ()
    return ((f',reason="{r}"', 1.0 if mask & bit else 0.0) for r, bit in _REASONS)


def _power_limit(gpu: GpuSensors, view: GpuView | None) -> Iterable[tuple[str, float]]:
    limit = None if view is None else view.number("power_limit_watts")
    return () if limit is None else (("", limit),)


_REASONS = tuple(CLOCK_EVENT_REASONS.items())

# (series, help, type, samples), in the order rendered.
FAMILIES: tuple[tuple[str, str, str, Samples], ...] = (
    ("plumb_gpu_temperature_celsius", "GPU temperature.", "gauge", _reading("temperature_celsius")),
    ("plumb_gpu_power_draw_watts", "GPU power draw.", "gauge", _reading("power_draw_watts")),
    (
        "plumb_gpu_power_limit_watts",
        "GPU power management limit (a fact, beside the draw for draw / limit).",
        "gauge",
        _power_limit,
    ),
    ("plumb_gpu_sm_clock_mhz", "Current SM clock of the GPU.", "gauge", _reading("sm_clock_mhz")),
    (
        "plumb_gpu_memory_clock_mhz",
        "Current memory clock of the GPU.",
        "gauge",
        _reading("memory_clock_mhz"),
    ),
    (
        "plumb_gpu_utilization_ratio",
        "Share of the last sample period a kernel ran on the GPU.",
        "gauge",
        _reading("gpu_utilization_ratio"),
    ),
    (
        "plumb_gpu_memory_utilization_ratio",
        "Share of the last sample period the GPU's memory was read or written.",
        "gauge",
        _reading("memory_utilization_ratio"),
    ),
    ("plumb_gpu_memory_used_bytes", "GPU memory in use.", "gauge", _reading("memory_used_bytes")),
    (
        "plumb_gpu_clock_event_active",
        "1 while this reason holds the GPU's clocks below their maximum (NVML clock events).",
        "gauge",
        _clock_events,
    ),
    (
        "plumb_gpu_ecc_corrected_volatile_total",
        "Corrected (single-bit) ECC errors since the driver loaded.",
        "counter",
        _reading("ecc_corrected_volatile"),
    ),
    (
        "plumb_gpu_ecc_corrected_aggregate_total",
        "Corrected (single-bit) ECC errors over the GPU's life.",
        "counter",
        _reading("ecc_corrected_aggregate"),
    ),
    (
        "plumb_gpu_pcie_replays_total",
        "PCIe replays (retransmissions) of the GPU's link.",
        "counter",
        _reading("pcie_replay_count"),
    ),
    (
        "plumb_gpu_nvlink_replay_errors_total",
        "NVLink data-link replay errors, summed over the GPU's links.",
        "counter",
        _reading("nvlink_replay_errors"),
    ),
    (
        "plumb_gpu_nvlink_recovery_errors_total",
        "NVLink data-link recovery errors, summed over the GPU's links.",
        "counter",
        _reading("nvlink_recovery_errors"),
    ),
    (
        "plumb_gpu_nvlink_crc_flit_errors_total",
        "NVLink data-link CRC flit errors, summed over the GPU's links.",
        "counter",
        _reading("nvlink_crc_flit_errors"),
    ),
)
TIMESTAMP = (
    "plumb_node_sensors_timestamp_seconds",
    "When the aggregator received the node's latest sensor readings.",
    "gauge",
)


class SensorSeries:
    """The sensor gauges of every node this process exports, as exposition text 0.0.4: a
    node's lines rendered when the intake touches it with new readings, joined at scrape."""

    def __init__(self, state: LiveState, membership: Membership):
        self._state = state
        # Which nodes this process exports: with replicas, the one holding the stream.
        self._membership = membership
        self._alive = membership.alive
        # What each node's lines were rendered from: its readings and its facts (the labels).
        self._from: dict[str, tuple[Sensors, dict]] = {}
        self._families = Families([f[:3] for f in (*FAMILIES, TIMESTAMP)])

    def touched(self, name: str) -> None:
        """Re-render node `name`'s lines if its readings or facts changed; drop them when it
        has none, is gone, or another replica exports it."""
        node = self._state.get(name)
        sensors = None if node is None else node.sensors
        if node is None or sensors is None or not self._membership.exports(node):
            self._from.pop(name, None)
            self._families.drop(name)
            return
        held = self._from.get(name)
        if held is None or held[0] is not sensors or held[1] is not node.facts:
            self._from[name] = (sensors, node.facts)
            self._families.set(name, _node_lines(node, sensors))

    def render(self) -> list[bytes]:
        if self._membership.alive != self._alive:
            # A replica came or went: which nodes are this one's changed (rare; every node).
            self._alive = self._membership.alive
            for name in {*self._from, *(n.name for n in self._state.nodes())}:
                self._from.pop(name, None)
                self.touched(name)
        return [self._families.render()]


def _node_lines(node: NodeState, sensors: Sensors) -> tuple[bytes, ...]:
    """One block of lines per family (FAMILIES order), then the node's timestamp line."""
    prefixes = node.derived("sensor_labels", _gpu_labels)
    blocks: list[list[str]] = [[] for _ in FAMILIES]
    for gpu in sensors.gpus:
        labels, view = prefixes.get(gpu.index) or _labels_of(node.name, gpu.index, None)
        for block, (name, _, _, samples) in zip(blocks, FAMILIES, strict=True):
            for more, value in samples(gpu, view):
                block.append(f"{name}{{{labels}{more}}} {floatToGoString(value)}\n")
    at = floatToGoString(sensors.at.timestamp())
    stamp = f'{TIMESTAMP[0]}{{node="{escape(node.name)}"}} {at}\n'
    return (*("".join(b).encode() for b in blocks), stamp.encode())


def _gpu_labels(node: NodeState) -> dict[object, tuple[str, GpuView | None]]:
    """Each GPU's label text and view by index, once per facts version."""
    return {(i := view.value("index")): _labels_of(node.name, i, view) for view in node.gpus()}


def _labels_of(node: str, index: object, view: GpuView | None) -> tuple[str, GpuView | None]:
    text = label_text(
        {
            "node": node,
            "gpu": str(index),
            "UUID": (view.text("uuid") if view else None) or "",
            "pci_bus_id": (view.text("pci_bus_id") if view else None) or "",
            "model_name": (view.text("name") if view else None) or "",
        }
    )
    return text, view
