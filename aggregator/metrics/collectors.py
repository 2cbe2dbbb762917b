"""Every `plumb_` series: ingest counters, and per-node series read from live state at scrape.

Versions appear only as labels of `_info` gauges; every node series has a `node` label, and
per-GPU series carry dcgm-exporter's GPU labels (`gpu`, `UUID`, `pci_bus_id`), so `on (UUID)`
joins them with its series without a label_replace. The GPU's name is `model_name`, as in
dcgm-exporter's NVLink series: its GPU series' `modelName` is camelCase, which promtool's lint
refuses. Each aggregator builds its own CollectorRegistry, so tests never share one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from plumb.aggregator import __version__
from plumb.aggregator.drift import SEVERITIES, Transitions
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.state.live import LiveState, NodeState, NodeSummary
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
    "MetricsPage",
    "NodeSeries",
    "StoreCollector",
    "ValidationMetrics",
    "ValidationResults",
    "new_registry",
]


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


class NodeSeries:
    """Per-node and per-GPU series, rendered as exposition text with each node's lines cached.

    A scrape used to rebuild every node's summary and every GPU's labels, and format every
    sample through prometheus_client: ~1.6 s at 10,000 nodes, on the event loop. A node's
    lines only change with its facts, its connection, its findings or its recipe, so they
    are kept per node under those keys; a scrape re-renders only the nodes that changed,
    formats each node's last-report timestamp, and joins the rest.
    """

    # (name, help, type) in the order rendered; _info families are gauges in this format.
    FAMILIES = (
        ("plumb_node_info", "GPU software stack per node.", "gauge"),
        ("plumb_node_gpus", "GPUs the node's agent reports.", "gauge"),
        ("plumb_agent_connected", "1 while the node's agent has a stream open.", "gauge"),
        (
            "plumb_node_last_report_timestamp_seconds",
            "When the node's agent last reported (facts or heartbeat).",
            "gauge",
        ),
        ("plumb_gpu_info", "Each GPU of each node.", "gauge"),
        ("plumb_node_findings", "Open drift findings per node.", "gauge"),
        ("plumb_node_recipe_info", "The recipe each node resolves to.", "gauge"),
    )

    def __init__(self, state: LiveState, evaluator: Evaluator, membership: Membership):
        self._state = state
        self._evaluator = evaluator
        # Which nodes this process exports: with replicas, one each.
        self._membership = membership
        self._cache: dict[str, _NodeLines] = {}

    def render(self) -> bytes:
        """The node families as text exposition format 0.0.4."""
        ev = self._evaluator
        per_node: dict[str, dict[str, int]] = {}
        for f in ev.drift.open_findings():
            sev = per_node.setdefault(f.node, {})
            sev[f.severity] = sev.get(f.severity, 0) + 1
        parts: list[list[str]] = [[] for _ in self.FAMILIES]
        info, gpu_counts, connected, last, gpus, counts, recipes = parts
        cache: dict[str, _NodeLines] = {}
        for node in self._state.nodes():
            if not self._membership.exports(node):
                continue
            lines = self._cache.get(node.name)
            # The hash names the content: a resent FullFacts is a new dict, not new lines.
            facts_key = (node.content_hash or id(node.facts), node.connected)
            if lines is None or lines.facts_key != facts_key:
                lines = _NodeLines.of(node, facts_key)
            resolution = ev.resolutions.get(node.name)
            found = tuple(per_node.get(node.name, {}).get(s, 0) for s in SEVERITIES)
            if lines.drift_key is None or lines.drift_key != (resolution, found):
                lines.render_drift(resolution, found)
            cache[node.name] = lines
            info.append(lines.info)
            gpu_counts.append(lines.gpu_count)
            connected.append(lines.connected)
            if node.last_report_at is not None:
                last.append(
                    f"{lines.last_prefix}{floatToGoString(node.last_report_at.timestamp())}\n"
                )
            gpus.append(lines.gpus)
            counts.append(lines.findings)
            recipes.append(lines.recipe)
        self._cache = cache
        out = []
        for (name, doc, kind), body in zip(self.FAMILIES, parts, strict=True):
            out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
            out.extend(body)
        return "".join(out).encode()


class _NodeLines:
    """One node's rendered lines and the keys they were rendered under."""

    __slots__ = (
        "connected",
        "drift_key",
        "facts_key",
        "findings",
        "gpu_count",
        "gpus",
        "info",
        "last_prefix",
        "name",
        "node",
        "recipe",
    )

    @classmethod
    def of(cls, node: NodeState, facts_key: tuple) -> _NodeLines:
        s = NodeSummary.of(node)
        lines = cls()
        lines.node, lines.name = s.name, _esc(s.name)
        lines.facts_key = facts_key
        lines.drift_key = None
        lines.findings = lines.recipe = ""
        lines.info = _line(
            "plumb_node_info",
            {
                "node": s.name,
                "driver_version": s.driver_version or "",
                "cuda_driver_version": s.cuda_driver_version or "",
                "gpu_product": s.gpu_product or "",
                "kernel": s.kernel or "",
                "os": s.os or "",
            },
            1.0,
        )
        lines.gpu_count = _line("plumb_node_gpus", {"node": s.name}, float(s.gpu_count))
        lines.connected = _line(
            "plumb_agent_connected", {"node": s.name}, 1.0 if s.connected else 0.0
        )
        lines.last_prefix = f'plumb_node_last_report_timestamp_seconds{{node="{lines.name}"}} '
        lines.gpus = "".join(
            _line(
                "plumb_gpu_info",
                {  # dcgm-exporter's join labels, beside Plumb's `node`
                    "node": s.name,
                    "gpu": str(g.value("index")),
                    "UUID": g.text("uuid") or "",
                    "pci_bus_id": g.text("pci_bus_id") or "",
                    "model_name": g.text("name") or "",
                },
                1.0,
            )
            for g in node.gpus()
        )
        return lines

    def render_drift(self, resolution: object, found: tuple[int, ...]) -> None:
        self.drift_key = (resolution, found)
        self.findings = "".join(
            f'plumb_node_findings{{node="{self.name}",severity="{_esc(sev)}"}} '
            f"{floatToGoString(n)}\n"
            for sev, n in zip(SEVERITIES, found, strict=True)
        )
        if resolution is None:
            self.recipe = ""
            return
        c = resolution.criteria  # type: ignore[attr-defined]
        owner = resolution.driver_owner  # type: ignore[attr-defined]
        self.recipe = _line(
            "plumb_node_recipe_info",
            {
                "node": self.node,
                "recipe_hash": resolution.content_hash[:12],  # type: ignore[attr-defined]
                "service": c.service,
                "accelerator": c.accelerator,
                "os": c.os,
                "intent": c.intent,
                # Who installs the driver (operator | host), and the GPUs the catalog does not
                # know ("NAME (PCI device 0xDDDD)", "" when none): never a silent `any`.
                "driver_owner": owner.owner if owner else "",
                "unknown_gpu": ", ".join(resolution.unknown_gpus),  # type: ignore[attr-defined]
            },
            1.0,
        )


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: dict[str, str], value: float) -> str:
    """One sample line, labels sorted by name as prometheus_client writes them."""
    body = ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}} {floatToGoString(value)}\n"


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
    """Open findings, recipes and pools from the evaluator at scrape; transitions as counted."""

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
        drift = GaugeMetricFamily(
            "plumb_node_drift",
            "1 while a drift finding is open.",
            labels=["node", "kind", "component", "severity"],
        )
        pools = GaugeMetricFamily(
            "plumb_pool_driver_versions",
            "Distinct driver versions among the nodes of a pool.",
            labels=["pool"],
        )
        ev = self._evaluator
        for f in ev.drift.open_findings():
            node = self._state.get(f.node)
            if node is None or self._membership.exports(node):
                drift.add_metric([f.node, f.kind, f.component, f.severity], 1.0)
        if self._membership.exports_cluster():
            for pool, n in sorted(ev.pool_driver_versions().items()):
                pools.add_metric([pool], n)
        yield from (drift, pools)


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


class MetricsPage:
    """The whole /metrics page: the registry's families, then the cached per-node ones
    (NodeSeries, and any other series rendered as text beside it: the sensor gauges)."""

    def __init__(self, registry: CollectorRegistry, nodes: NodeSeries, *more: TextSeries):
        self._registry = registry
        self._series = (nodes, *more)

    def render(self) -> bytes:
        return generate_latest(self._registry) + b"".join(s.render() for s in self._series)


class TextSeries(Protocol):
    """Families that render their own exposition text (cached per node)."""

    def render(self) -> bytes: ...


def new_registry(writer: Writer) -> CollectorRegistry:
    """A fresh registry with the build info, the write path's health, and the process's own
    `process_*` and `python_*` series (as prometheus_client's default registry has them).

    The per-node families are not in the registry: NodeSeries renders them beside it.
    """
    registry = CollectorRegistry()
    Info("plumb_build", "Plumb aggregator build.", registry=registry).info({"version": __version__})
    registry.register(StoreCollector(writer))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
