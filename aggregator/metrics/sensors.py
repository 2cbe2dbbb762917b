"""GPU sensor series: each streaming node's latest readings, on their own page.

Readings are not facts (plumb/v1/facts.proto): no history, no drift, only the latest value,
and only while the node's agent streams, so a gone node's series vanish instead of lying.
They are served at `/metrics/sensors`, apart from `/metrics`: at 10,000 8-GPU nodes they are
most of the bytes (bench/README.md), and Prometheus scrapes them on their own interval. Each
GPU series carries `node` and `gpu` only; `plumb_gpu_info` (on /metrics) carries
dcgm-exporter's `UUID`, `pci_bus_id` and `model_name` for that GPU, so
`* on (node, gpu) group_left (UUID, model_name) plumb_gpu_info` joins them in. The error
counts are counters (`_total`: rate() reads them, resets included); the clock-event mask is
a gauge of 1 per reason it holds, since PromQL cannot test a bit, and no series for a reason
it does not: a series for each of the seven, nearly all 0, was a third of the page's bytes
and over a quarter of its series (bench/README.md, round 46). The power limit, a fact, is
rendered here beside the draw with the same labels, so draw / limit divides in one scrape.

A report costs what changed: each node's lines are kept per family with the readings they
show, and only the families whose readings moved are formatted again. A scrape joins the
kept bytes a slice of nodes at a time, and only the slices whose nodes reported since
(metrics/text.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.utils import floatToGoString

from plumb.aggregator.metrics.text import NODES_PER_PIECE, Families, escape
from plumb.aggregator.state.live import LiveState, NodeState, Sensors
from plumb.aggregator.state.replicas import Membership
from plumb.sensors import CLOCK_EVENT_REASONS, GpuSensors

__all__ = ["SensorSeries"]

# Where a family's samples come from beside a GpuSensors field: the facts' power limit, and
# the clock-event mask as one sample per reason.
POWER_LIMIT = "power_limit"
CLOCK_EVENTS = "clock_events"

# (series, help, type, source), in the order rendered; source is a GpuSensors field or one
# of the two above.
FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    ("plumb_gpu_temperature_celsius", "GPU temperature.", "gauge", "temperature_celsius"),
    ("plumb_gpu_power_draw_watts", "GPU power draw.", "gauge", "power_draw_watts"),
    (
        "plumb_gpu_power_limit_watts",
        "GPU power management limit (a fact, beside the draw for draw / limit).",
        "gauge",
        POWER_LIMIT,
    ),
    ("plumb_gpu_sm_clock_mhz", "Current SM clock of the GPU.", "gauge", "sm_clock_mhz"),
    (
        "plumb_gpu_memory_clock_mhz",
        "Current memory clock of the GPU.",
        "gauge",
        "memory_clock_mhz",
    ),
    (
        "plumb_gpu_utilization_ratio",
        "Share of the last sample period a kernel ran on the GPU.",
        "gauge",
        "gpu_utilization_ratio",
    ),
    (
        "plumb_gpu_memory_utilization_ratio",
        "Share of the last sample period the GPU's memory was read or written.",
        "gauge",
        "memory_utilization_ratio",
    ),
    ("plumb_gpu_memory_used_bytes", "GPU memory in use.", "gauge", "memory_used_bytes"),
    (
        "plumb_gpu_clock_event_active",
        "1 while this reason holds the GPU's clocks below their maximum (NVML clock events); "
        "no series while it does not.",
        "gauge",
        CLOCK_EVENTS,
    ),
    (
        "plumb_gpu_ecc_corrected_volatile_total",
        "Corrected (single-bit) ECC errors since the driver loaded.",
        "counter",
        "ecc_corrected_volatile",
    ),
    (
        "plumb_gpu_ecc_corrected_aggregate_total",
        "Corrected (single-bit) ECC errors over the GPU's life.",
        "counter",
        "ecc_corrected_aggregate",
    ),
    (
        "plumb_gpu_pcie_replays_total",
        "PCIe replays (retransmissions) of the GPU's link.",
        "counter",
        "pcie_replay_count",
    ),
    (
        "plumb_gpu_nvlink_replay_errors_total",
        "NVLink data-link replay errors, summed over the GPU's links.",
        "counter",
        "nvlink_replay_errors",
    ),
    (
        "plumb_gpu_nvlink_recovery_errors_total",
        "NVLink data-link recovery errors, summed over the GPU's links.",
        "counter",
        "nvlink_recovery_errors",
    ),
    (
        "plumb_gpu_nvlink_crc_flit_errors_total",
        "NVLink data-link CRC flit errors, summed over the GPU's links.",
        "counter",
        "nvlink_crc_flit_errors",
    ),
)
TIMESTAMP = (
    "plumb_node_sensors_timestamp_seconds",
    "When the aggregator received the node's latest sensor readings.",
    "gauge",
)

_REASONS = tuple(CLOCK_EVENT_REASONS.items())
_SOURCES = tuple(f[3] for f in FAMILIES)
# Per family, the position in GpuSensors of the reading its lines show; None for the power
# limit, a fact, the same for a node's facts version.
_FIELDS = tuple(
    None
    if source == POWER_LIMIT
    else GpuSensors._fields.index("clock_event_reasons" if source == CLOCK_EVENTS else source)
    for source in _SOURCES
)
_ALL = range(len(FAMILIES))
# (family, GpuSensors position) of the families that show a reading.
_READINGS = tuple((k, f) for k, f in enumerate(_FIELDS) if f is not None)


class SensorSeries:
    """The sensor gauges of every node this process exports, as exposition text 0.0.4: a
    node's lines rendered when the intake tells of new readings, joined at scrape."""

    def __init__(self, state: LiveState, membership: Membership):
        self._state = state
        # Which nodes this process exports: with replicas, the one holding the stream.
        self._membership = membership
        self._alive = membership.alive
        self._nodes: dict[str, _NodeLines] = {}
        self._families = Families([f[:3] for f in (*FAMILIES, TIMESTAMP)], NODES_PER_PIECE)

    def touched(self, name: str) -> None:
        """Re-render node `name`'s lines if its readings or facts changed; drop them when it
        has none, is gone, or another replica exports it."""
        node = self._state.get(name)
        sensors = None if node is None else node.sensors
        if node is None or sensors is None or not self._membership.exports(node):
            self._nodes.pop(name, None)
            self._families.drop(name)
            return
        lines = self._nodes.get(name)
        if lines is None or lines.facts is not node.facts:
            lines = self._nodes[name] = _NodeLines(node)
        elif lines.sensors is sensors:
            return
        self._families.set(name, lines.render(sensors))

    def pieces(self) -> Iterator[bytes]:
        """The page as text exposition format 0.0.4, in pieces of a few hundred nodes each,
        joined as they are sent so that no one join holds the loop for the whole fleet."""
        if self._membership.alive != self._alive:
            # A replica came or went: which nodes are this one's changed (rare; every node).
            self._alive = self._membership.alive
            for name in {*self._nodes, *(n.name for n in self._state.nodes())}:
                self._nodes.pop(name, None)
                self.touched(name)
        return self._families.pieces()


class _NodeLines:
    """One node's GPU label sets, its readings and its families' blocks, so a report formats
    again only the families whose readings moved: each such block, all of the node's GPUs.
    No line is kept apart from its block: per GPU, the lines and their prefixes held 4-5 KiB,
    at 10,000 8-GPU nodes a fifth of the process's RSS (bench/README.md, round 48)."""

    __slots__ = ("blocks", "facts", "labels", "limits", "name", "readings", "sensors", "stamp")

    def __init__(self, node: NodeState):
        self.facts = node.facts
        self.name = escape(node.name)
        self.sensors: Sensors | None = None
        self.stamp = f'{TIMESTAMP[0]}{{node="{self.name}"}} '
        self.limits = {
            view.value("index"): view.number("power_limit_watts") for view in node.gpus()
        }
        self.readings: tuple[GpuSensors, ...] = ()  # as `blocks` show them, in their order
        self.labels: tuple[str, ...] = ()  # each GPU's label set, in that order
        self.blocks = [b""] * len(FAMILIES)  # per family, every GPU's lines of it

    def render(self, sensors: Sensors) -> tuple[bytes, ...]:
        """One bytes per family (FAMILIES order), then the node's timestamp line."""
        self.sensors = sensors
        gpus = sensors.gpus
        if [g.index for g in gpus] != [g.index for g in self.readings]:
            # A GPU came, left or moved in the report: every family, with new label sets.
            self.labels = tuple(f'gpu="{g.index}",node="{self.name}"' for g in gpus)
            moved: Iterable[int] = _ALL
        else:
            moved = set()
            for gpu, held in zip(gpus, self.readings, strict=True):
                if gpu is not held and gpu != held:
                    moved.update(k for k, f in _READINGS if gpu[f] != held[f])
        self.readings = gpus
        for k in moved:
            self.blocks[k] = self._block(k, gpus).encode()
        stamp = f"{self.stamp}{_number(sensors.at.timestamp())}\n"
        return (*self.blocks, stamp.encode())

    def _block(self, k: int, gpus: tuple[GpuSensors, ...]) -> str:
        """Family `k`'s lines for the node's GPUs `gpus`."""
        name, source = FAMILIES[k][0], _SOURCES[k]
        if source == CLOCK_EVENTS:
            return "".join(
                f'{name}{{{labels},reason="{reason}"}} 1.0\n'
                for labels, gpu in zip(self.labels, gpus, strict=True)
                if gpu.clock_event_reasons
                for reason, bit in _REASONS
                if gpu.clock_event_reasons & bit
            )
        if source == POWER_LIMIT:
            values = [self.limits.get(gpu.index) for gpu in gpus]
        else:
            field = _FIELDS[k]
            values = [gpu[field] for gpu in gpus]
        return "".join(
            [
                f"{name}{{{labels}}} {_number(value)}\n"
                for labels, value in zip(self.labels, values, strict=True)
                if value is not None
            ]
        )


def _number(value: float) -> str:
    """floatToGoString's text: below a million in size it is Python's repr of the float
    (Go turns to exponents only from there), which skips its checks for the common case."""
    return repr(float(value)) if -1e6 < value < 1e6 else floatToGoString(value)
