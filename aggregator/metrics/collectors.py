"""The registry's `plumb_` series: ingest and store counters, pools, validation results, build.

MetricsPage puts them on one page with the per-node families, which are rendered per node as
nodes change (metrics/nodes.py), and serves the sensor gauges (metrics/sensors.py) as a page of
their own. Versions appear only as labels of `_info` gauges; every node series has a `node`
label, and `plumb_gpu_info` carries dcgm-exporter's GPU labels (`gpu`, `UUID`, `pci_bus_id`),
so `on (UUID)` joins it with dcgm-exporter's series without a label_replace. The GPU's name
is `model_name`, as in dcgm-exporter's NVLink series: its GPU series' `modelName` is
camelCase, which promtool's lint refuses. Each aggregator builds its own CollectorRegistry,
so tests never share one.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from plumb.aggregator import __version__
from plumb.aggregator.drift import Transitions
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.metrics.packed import Packed, gzip_stream, pack
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.state.replicas import Membership
from plumb.aggregator.store import Writer
from plumb.aggregator.store.retention import Retention

if TYPE_CHECKING:
    from plumb.aggregator.validation import ValidationRun, Validator

__all__ = [
    "ClusterErrors",
    "DriftMetrics",
    "IngestMetrics",
    "LeaderCollector",
    "LoopLag",
    "MetricsPage",
    "ProcessMetrics",
    "StoreCollector",
    "ValidationMetrics",
    "ValidationResults",
    "new_registry",
]


class IngestMetrics:
    """Counters of what arrives on the agents' streams, and how long its replies take."""

    def __init__(self, registry: CollectorRegistry):
        self.messages = Counter(
            "plumb_ingest_messages",
            "Messages received from agents, by type.",
            ["type"],
            registry=registry,
        )
        self.received_bytes = Counter(
            "plumb_ingest_received_bytes",
            "Serialized bytes of messages received from agents.",
            registry=registry,
        )
        self.resyncs = Counter(
            "plumb_ingest_resyncs",
            "Resyncs requested from agents, by reason.",
            ["reason"],
            registry=registry,
        )
        self.rejected = Counter(
            "plumb_ingest_streams_closed_by_aggregator",
            "Streams the aggregator closed with an error status, by reason.",
            ["reason"],
            registry=registry,
        )
        self.superseded = Counter(
            "plumb_ingest_streams_superseded",
            "Streams replaced by a newer stream for the same node name.",
            registry=registry,
        )
        self.resumed = Counter(
            "plumb_ingest_streams_resumed",
            "Streams whose Hello named facts the aggregator holds for the node, so that no "
            "FullFacts was sent (a reconnect after an aggregator restart).",
            registry=registry,
        )
        self.syncing = Gauge(
            "plumb_ingest_streams_syncing",
            "Streams between their turn to sync and their first facts applied.",
            registry=registry,
        )
        self.waiting = Gauge(
            "plumb_ingest_streams_waiting",
            "Streams welcomed and waiting their turn to sync, their FullFacts unread "
            "(a cold start or a reconnect storm beyond what syncs at once).",
            registry=registry,
        )
        self.reply = Histogram(
            "plumb_ingest_reply_seconds",
            "From an agent's message read off its stream to the reply (Welcome, Ack or Resync) "
            "written, by the message's type: the aggregator's part of the agent's wait, beside "
            "the event loop's lag before the read.",
            ["type"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=registry,
        )


class StoreCollector(Collector):
    """The write path's health: queue depth, drops, rows written."""

    def __init__(self, writer: Writer):
        self._writer = writer

    def collect(self) -> Iterator[Metric]:
        w = self._writer
        yield GaugeMetricFamily(
            "plumb_store_pending_updates", "Updates waiting for the database.", value=w.pending
        )
        yield _counter(
            "plumb_store_dropped_updates", "Updates dropped: write queue full.", w.dropped
        )
        yield _counter(
            "plumb_store_written_changes", "Fact change rows written.", w.written_changes
        )
        yield _counter("plumb_store_batches", "Write transactions committed.", w.batches)
        yield GaugeMetricFamily(
            "plumb_store_healthy",
            "1 while the last database write succeeded.",
            value=1.0 if w.healthy else 0.0,
        )


class PrunedRows(Collector):
    """Rows retention deleted since start, per table (store/retention.py)."""

    def __init__(self, registry: CollectorRegistry, retention: Retention):
        self._retention = retention
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        m = CounterMetricFamily(
            "plumb_store_pruned_rows",
            "Rows deleted for being older than store.retention_days.",
            labels=["table"],
        )
        for table, n in sorted(self._retention.pruned.items()):
            m.add_metric([table], n)
        yield m


def _counter(name: str, doc: str, value: float) -> Metric:
    return CounterMetricFamily(name, doc, value=value)


class DriftMetrics(Collector):
    """Pools from the evaluator at scrape; transitions as counted. The open findings are node
    series (metrics/nodes.py)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        state: LiveState,
        evaluator: Evaluator,
        membership: Membership,
    ):
        self._state = state
        self._evaluator = evaluator
        # With replicas, node series and cluster-wide series each come from one replica.
        self._membership = membership
        self.transitions = Counter(
            "plumb_drift_transitions",
            "Drift findings opened and closed, by kind, severity and action.",
            ["kind", "severity", "action"],
            registry=registry,
        )
        registry.register(self)

    def count(self, transitions: Transitions) -> None:
        """Count what one evaluation opened and closed."""
        node = self._state.get(transitions.node)
        if node is not None and not self._membership.exports(node):
            return  # only its exporter counts it, or replicas evaluating it too would double it
        for action, findings in (("opened", transitions.opened), ("closed", transitions.closed)):
            for f in findings:
                self.transitions.labels(kind=f.kind, severity=f.severity, action=action).inc()

    def collect(self) -> Iterator[Metric]:
        pools = GaugeMetricFamily(
            "plumb_pool_driver_versions",
            "Distinct driver versions among the nodes of a pool.",
            labels=["pool"],
        )
        if self._membership.exports_cluster():
            for pool, n in sorted(self._evaluator.pool_driver_versions().items()):
                pools.add_metric([pool], n)
        yield pools


class ValidationMetrics:
    """Validation runs finished, by result; counted by the validator."""

    def __init__(self, registry: CollectorRegistry):
        self.runs = Counter(
            "plumb_validation_runs",
            "Validation runs finished, by result (passed or failed).",
            ["result"],
            registry=registry,
        )

    def finished(self, run: ValidationRun) -> None:
        self.runs.labels(result=run.result or "failed").inc()


class ScheduleMetrics:
    """Due slots of scheduled validation, by phase and outcome (validation/schedule.py)."""

    def __init__(self, registry: CollectorRegistry):
        self.slots = Counter(
            "plumb_validation_scheduled",
            "Scheduled validation slots come due, by phase and outcome: started, or skipped "
            "for overlap (a run in progress), busy (no idle node) or no_nodes.",
            ["phase", "outcome"],
            registry=registry,
        )

    def count(self, phase: str, outcome: str) -> None:
        self.slots.labels(phase=phase, outcome=outcome).inc()


class ValidationResults(Collector):
    """Each node's last result of each check and benchmark, read from the validator."""

    # plumb_validation_check_status values; skip is left out (nothing was judged).
    STATUS_VALUE = {"pass": 0, "warn": 1, "fail": 2, "error": 3}

    def __init__(self, registry: CollectorRegistry, validator: Validator):
        self._validator = validator
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        status = GaugeMetricFamily(
            "plumb_validation_check_status",
            "Last result of each check on each node: 0 pass, 1 warn, 2 fail, 3 error.",
            labels=["node", "check"],
        )
        value = GaugeMetricFamily(
            "plumb_benchmark_value",
            "Last figure each benchmark measured on each node, in `unit`.",
            labels=["node", "benchmark", "unit"],
        )
        ratio = GaugeMetricFamily(
            "plumb_benchmark_ratio_to_peak",
            "Last benchmark figure as a fraction of the GPU's catalog peak.",
            labels=["node", "benchmark"],
        )
        for (node, check), r in sorted(self._validator.latest.items()):
            if r.status in self.STATUS_VALUE:
                status.add_metric([node, check], self.STATUS_VALUE[r.status])
            if r.value is not None and r.unit:
                value.add_metric([node, check, r.unit], r.value)
            if r.ratio_to_peak is not None:
                ratio.add_metric([node, check], r.ratio_to_peak)
        yield status
        yield value
        yield ratio


class ClusterErrors:
    """Failed rounds of the Kubernetes loops, counted by them."""

    def __init__(self, registry: CollectorRegistry):
        self.errors = Counter(
            "plumb_kubernetes_errors",
            "Failed rounds of the Kubernetes loops (discovery, node_write), retried next round.",
            ["loop"],
            registry=registry,
        )

    def count(self, loop: str) -> None:
        self.errors.labels(loop=loop).inc()


class RemediationActions:
    """The leader's cordons, the uncordons asked for, and cordons the circuit breaker held back
    (once per node and findings)."""

    ACTIONS = ("cordon", "uncordon", "blocked")

    def __init__(self, registry: CollectorRegistry):
        self.actions = Counter(
            "plumb_remediation_actions",
            "Remediation actions: cordon, uncordon, and blocked by the circuit breaker.",
            ["action"],
            registry=registry,
        )
        for action in self.ACTIONS:  # every series from the start, so rate() sees the first
            self.actions.labels(action=action)

    def count(self, action: str) -> None:
        self.actions.labels(action=action).inc()


class LeaderCollector(Collector):
    """Whether this replica holds the Lease; only where there is a Kubernetes side."""

    def __init__(self, registry: CollectorRegistry, is_leader: Callable[[], bool]):
        self._is_leader = is_leader
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "plumb_leader",
            "1 while this replica holds the Lease and does the cluster-wide work, else 0.",
            value=1.0 if self._is_leader() else 0.0,
        )


class LoopLag:
    """How late the event loop runs a timer: every stream's Ack, every scrape and every API
    call waits on the loop, so this is what anything holding it (a render, a collector pass,
    a big write) costs the rest."""

    PERIOD_S = 0.1
    BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

    def __init__(self, registry: CollectorRegistry):
        self.lag = Histogram(
            "plumb_event_loop_lag_seconds",
            f"How much later than due the event loop ran a {self.PERIOD_S} s timer.",
            buckets=self.BUCKETS,
            registry=registry,
        )

    async def run(self) -> None:
        """Time the loop until cancelled."""
        while True:
            due = time.monotonic() + self.PERIOD_S
            await asyncio.sleep(self.PERIOD_S)
            self.lag.observe(max(0.0, time.monotonic() - due))


class ProcessMetrics(Collector):
    """The `process_*` series of prometheus_client's ProcessCollector, with the open
    descriptors read from the size Linux (6.2 and later) gives /proc/self/fd. That collector
    lists the directory, one entry per agent stream: 13 ms of every scrape at 10,000 streams,
    against 7 us for the size (bench/README.md). Where the size reads 0 (older kernels) the
    directory is listed."""

    def __init__(self, registry: CollectorRegistry):
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._page = resource.getpagesize()
        self._boot: float | None = None  # None: no /proc here, so no series
        try:
            with open("/proc/stat", "rb") as stat:
                self._boot = next(float(ln.split()[1]) for ln in stat if ln.startswith(b"btime "))
        except (OSError, StopIteration):
            pass
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        if self._boot is None:
            return
        with open("/proc/self/stat", "rb") as stat:
            # Fields after the command's closing parenthesis, from the state (field 3) on.
            f = stat.read().rpartition(b")")[2].split()
        yield GaugeMetricFamily(
            "process_virtual_memory_bytes", "Virtual memory size in bytes.", value=float(f[20])
        )
        yield GaugeMetricFamily(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            value=float(f[21]) * self._page,
        )
        yield GaugeMetricFamily(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            value=float(f[19]) / self._ticks + self._boot,
        )
        yield CounterMetricFamily(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            value=(float(f[11]) + float(f[12])) / self._ticks,
        )
        fds = "/proc/self/fd"
        yield GaugeMetricFamily(
            "process_open_fds",
            "Number of open file descriptors.",
            value=float(os.stat(fds).st_size or len(os.listdir(fds))),
        )
        yield GaugeMetricFamily(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            value=float(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
        )


class MetricsPage:
    """The /metrics page: the registry's families, then the per-node ones (NodeSeries); and
    the /metrics/sensors page, the sensor gauges (SensorSeries), kept apart because they are
    most of the bytes at fleet size and move with every report, not with the stack."""

    def __init__(self, registry: CollectorRegistry, nodes: NodeText, sensors: SensorText):
        self._registry = registry
        self._nodes = nodes
        self._sensors = sensors

    def touched(self, name: str) -> None:
        """Node `name` changed (the intake says so): re-render what it shows."""
        self._nodes.touched(name)
        self._sensors.touched(name)

    def seen(self, name: str) -> None:
        """Only node `name`'s report time moved: its last-report line shows it."""
        self._nodes.seen(name)

    def sensed(self, name: str) -> None:
        """Node `name` has new readings: only its sensor gauges show them."""
        self._sensors.touched(name)

    def render(self) -> list[bytes]:
        """The page in pieces, to be sent as they are: joining them would copy the page."""
        return [generate_latest(self._registry), *self._nodes.render()]

    async def render_gzip(self) -> bytes:
        """The page gzip-encoded: the node families' deflated pieces are kept until they
        change (metrics/packed.py); the registry's few KB are deflated anew. Joined: a few MB
        go out in a few slices (api/paced.py), where ~270 pieces took as many turns of the
        event loop, each behind whatever else was ready."""
        nodes = await self._nodes.packed()
        return b"".join(gzip_stream([pack(generate_latest(self._registry)), *nodes]))

    def sensors(self) -> Iterator[bytes]:
        """The sensor page in pieces, joined as they are sent."""
        return self._sensors.pieces()


class NodeText(Protocol):
    """Families whose samples come from many nodes, rendered per node as it changes."""

    def touched(self, name: str) -> None: ...

    def seen(self, name: str) -> None: ...

    def render(self) -> list[bytes]: ...

    async def packed(self) -> list[Packed]: ...


class SensorText(Protocol):
    """The sensor gauges, rendered per node as readings arrive, joined in pieces at scrape."""

    def touched(self, name: str) -> None: ...

    def pieces(self) -> Iterator[bytes]: ...


def new_registry(writer: Writer) -> CollectorRegistry:
    """A fresh registry with the build info, the write path's health, and the process's own
    `process_*` and `python_*` series (as prometheus_client's default registry has them).

    The per-node families are not in the registry: NodeSeries and SensorSeries render them.
    """
    registry = CollectorRegistry()
    Info("plumb_build", "Plumb aggregator build.", registry=registry).info({"version": __version__})
    registry.register(StoreCollector(writer))
    ProcessMetrics(registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
