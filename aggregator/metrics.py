"""Every `plumb_` series: ingest counters, and per-node series read from live state at scrape.

Versions appear only as labels of `_info` gauges; every node series has a `node` label.
Each aggregator builds its own CollectorRegistry, so tests never share one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Info
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from aggregator import __version__
from aggregator.drift import SEVERITIES, Transitions
from aggregator.state import LiveState, NodeSummary
from aggregator.store import Writer

if TYPE_CHECKING:
    from aggregator.evaluation import Evaluator

__all__ = ["DriftMetrics", "IngestMetrics", "Metrics", "build_registry"]


class IngestMetrics:
    """Counters of what arrives on the agents' streams."""

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


class NodeCollector(Collector):
    """Per-node and per-GPU series, straight from live state at scrape time."""

    def __init__(self, state: LiveState):
        self._state = state

    def collect(self) -> Iterator[Metric]:
        info = InfoMetricFamily(
            "plumb_node",
            "GPU software stack per node.",
            labels=[
                "node",
                "driver_version",
                "cuda_driver_version",
                "gpu_product",
                "gpu_count",
                "kernel",
                "os",
            ],
        )
        connected = GaugeMetricFamily(
            "plumb_agent_connected", "1 while the node's agent has a stream open.", labels=["node"]
        )
        last = GaugeMetricFamily(
            "plumb_node_last_report_timestamp_seconds",
            "When the node's agent last reported (facts or heartbeat).",
            labels=["node"],
        )
        gpus = InfoMetricFamily(
            "plumb_gpu", "Each GPU of each node.", labels=["node", "gpu", "uuid", "product"]
        )
        for node in self._state.nodes():
            s = NodeSummary.of(node)
            info.add_metric(
                [
                    s.name,
                    s.driver_version or "",
                    s.cuda_driver_version or "",
                    s.gpu_product or "",
                    str(s.gpu_count),
                    s.kernel or "",
                    s.os or "",
                ],
                {},
            )
            connected.add_metric([s.name], 1.0 if s.connected else 0.0)
            if s.last_report_at is not None:
                last.add_metric([s.name], s.last_report_at.timestamp())
            for i in range(s.gpu_count):
                gpus.add_metric(
                    [
                        s.name,
                        str(node.value(f"gpus[{i}].index")),
                        str(node.value(f"gpus[{i}].uuid") or ""),
                        str(node.value(f"gpus[{i}].name") or ""),
                    ],
                    {},
                )
        yield from (info, connected, last, gpus)


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


def _counter(name: str, doc: str, value: float) -> Metric:
    return CounterMetricFamily(name, doc, value=value)


class DriftMetrics(Collector):
    """Open findings, recipes and pools from the evaluator at scrape; transitions as counted."""

    def __init__(self, registry: CollectorRegistry, state: LiveState):
        self._state = state
        self._evaluator: Evaluator | None = None
        self.transitions = Counter(
            "plumb_drift_transitions",
            "Drift findings opened and closed, by kind, severity and action.",
            ["kind", "severity", "action"],
            registry=registry,
        )
        registry.register(self)

    def watch(self, evaluator: Evaluator) -> None:
        """Read findings, recipes and pools from `evaluator` from now on."""
        self._evaluator = evaluator

    def count(self, transitions: Transitions) -> None:
        for action, findings in (("opened", transitions.opened), ("closed", transitions.closed)):
            for f in findings:
                self.transitions.labels(kind=f.kind, severity=f.severity, action=action).inc()

    def collect(self) -> Iterator[Metric]:
        drift = GaugeMetricFamily(
            "plumb_node_drift",
            "1 while a drift finding is open.",
            labels=["node", "kind", "component", "severity"],
        )
        counts = GaugeMetricFamily(
            "plumb_node_findings", "Open drift findings per node.", labels=["node", "severity"]
        )
        recipe = InfoMetricFamily(
            "plumb_node_recipe",
            "The recipe each node resolves to.",
            labels=["node", "recipe_hash", "service", "accelerator", "os", "intent"],
        )
        pools = GaugeMetricFamily(
            "plumb_pool_driver_versions",
            "Distinct driver versions among the nodes of a pool.",
            labels=["pool"],
        )
        ev = self._evaluator
        if ev is not None:
            per_node: dict[str, dict[str, int]] = {}
            for f in ev.drift.open_findings():
                drift.add_metric([f.node, f.kind, f.component, f.severity], 1.0)
                sev = per_node.setdefault(f.node, {})
                sev[f.severity] = sev.get(f.severity, 0) + 1
            for node in self._state.nodes():
                for severity in SEVERITIES:
                    counts.add_metric(
                        [node.name, severity], per_node.get(node.name, {}).get(severity, 0)
                    )
                r = ev.resolutions.get(node.name)
                if r is not None:
                    c = r.criteria
                    recipe.add_metric(
                        [node.name, r.content_hash[:12], c.service, c.accelerator, c.os, c.intent],
                        {},
                    )
            for pool, n in sorted(ev.pool_driver_versions().items()):
                pools.add_metric([pool], n)
        yield from (drift, counts, recipe, pools)


@dataclass(frozen=True)
class Metrics:
    """The instruments other modules count with."""

    ingest: IngestMetrics
    drift: DriftMetrics


def build_registry(state: LiveState, writer: Writer) -> tuple[CollectorRegistry, Metrics]:
    """A fresh registry with build info, ingest, node, store and drift series."""
    registry = CollectorRegistry()
    Info("plumb_build", "Plumb aggregator build.", registry=registry).info({"version": __version__})
    registry.register(NodeCollector(state))
    registry.register(StoreCollector(writer))
    return registry, Metrics(IngestMetrics(registry), DriftMetrics(registry, state))
