"""Per-node and per-GPU series of the nodes this process exports, rendered as each node changes.

The intake calls `touched` with a node's name whenever it changes what the node's series show
(its facts, connection, last report, findings, recipe, or its removal), so a node's lines are
rendered once per change of that node and a scrape only joins them (metrics/text.py). The
last-report timestamp moves with every heartbeat, so it is kept apart from the stack's lines.
Versions appear only as labels of `_info` gauges; `plumb_gpu_info` carries dcgm-exporter's
GPU labels (`gpu`, `UUID`, `pci_bus_id`, and `model_name`), so `on (UUID)` joins its series.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from prometheus_client.utils import floatToGoString

from plumb.aggregator.drift import SEVERITIES
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.metrics.packed import Packed
from plumb.aggregator.metrics.text import NODES_PER_PIECE, Families, escape, label_text
from plumb.aggregator.state.live import LiveState, NodeState, NodeSummary
from plumb.aggregator.state.replicas import Membership

__all__ = ["NodeSeries"]

# (name, help, type) in the order rendered; _info families are gauges in this format.
STACK = (
    ("plumb_node_info", "GPU software stack per node.", "gauge"),
    ("plumb_node_gpus", "GPUs the node's agent reports.", "gauge"),
    ("plumb_agent_connected", "1 while the node's agent has a stream open.", "gauge"),
    ("plumb_gpu_info", "Each GPU of each node.", "gauge"),
    ("plumb_node_findings", "Open drift findings per node.", "gauge"),
    ("plumb_node_recipe_info", "The recipe each node resolves to.", "gauge"),
    ("plumb_node_drift", "1 while a drift finding is open.", "gauge"),
)
LAST_REPORT = (
    "plumb_node_last_report_timestamp_seconds",
    "When the node's agent last reported (facts or heartbeat).",
    "gauge",
)

# Nodes per slice of the last-report line: every heartbeat moves one, so between two scrapes
# back to back a few slices hold a moved line, and only those are joined and deflated again.
SEEN_PER_PIECE = 100


class NodeSeries:
    """The node families: each node's lines rendered when it is touched, joined at scrape."""

    def __init__(self, state: LiveState, evaluator: Evaluator, membership: Membership):
        self._state = state
        self._evaluator = evaluator
        # Which nodes this process exports: with replicas, one each.
        self._membership = membership
        self._alive = membership.alive
        self._nodes: dict[str, _NodeLines] = {}
        self._stack = Families(STACK, NODES_PER_PIECE)
        self._seen = Families((LAST_REPORT,), SEEN_PER_PIECE)

    def touched(self, name: str) -> None:
        """Re-render what changed of node `name`'s lines; drop them when it is gone or
        exported by another replica."""
        node = self._state.get(name)
        if node is None or not self._membership.exports(node):
            self._nodes.pop(name, None)
            self._stack.drop(name)
            self._seen.drop(name)
            return
        # Facts dicts are replaced, never edited in place: the dict itself is the key (held,
        # so its id is never reused). The agent's hash alone would miss a change the cluster
        # overlay makes (Intake.cluster_facts). New facts that show the same (a counter's
        # delta) keep the lines. A stream's open or end (after a restart, every node's
        # resume) changes one line.
        lines = self._nodes.get(name)
        if lines is None or lines.facts is not node.facts:
            shown = _shown(node)
            if lines is None or lines.shown != shown:
                lines = self._nodes[name] = _NodeLines.of(node, shown)
            else:
                lines.facts = node.facts
        if lines.up != node.connected:
            lines.render_connected(node.connected)
        ev = self._evaluator
        resolution, findings = ev.resolutions.get(name), tuple(ev.drift.open_findings(name))
        held = lines.drift_key
        if held is None or held[0] is not resolution or held[1] != findings:
            lines.render_drift(resolution, findings)
        self._stack.set(name, lines.stack())
        if node.last_report_at is None:
            self._seen.drop(name)
        else:
            at = floatToGoString(node.last_report_at.timestamp())
            self._seen.set(name, (f"{lines.last_prefix}{at}\n".encode(),))

    def seen(self, name: str) -> None:
        """Only node `name`'s report time moved (a heartbeat): re-render that one line, or
        all of the node's when it has none rendered yet."""
        node, lines = self._state.get(name), self._nodes.get(name)
        if node is None or lines is None or node.last_report_at is None:
            self.touched(name)
            return
        at = floatToGoString(node.last_report_at.timestamp())
        self._seen.set(name, (f"{lines.last_prefix}{at}\n".encode(),))

    def render(self) -> list[bytes]:
        """The node families as text exposition format 0.0.4, in pieces."""
        self._follow_membership()
        return [*self._stack.pieces(), *self._seen.pieces()]

    async def packed(self) -> list[Packed]:
        """The pieces of `render`, deflated (metrics/packed.py)."""
        self._follow_membership()
        stack, seen = await asyncio.gather(self._stack.packed(), self._seen.packed())
        return [*stack, *seen]

    def _follow_membership(self) -> None:
        if self._membership.alive != self._alive:
            # A replica came or went: which nodes are this one's changed (rare; every node).
            self._alive = self._membership.alive
            for name in {*self._nodes, *(n.name for n in self._state.nodes())}:
                self.touched(name)


class _NodeLines:
    """One node's rendered lines and the keys they were rendered under."""

    __slots__ = (
        "connected",
        "drift",
        "drift_key",
        "facts",
        "findings",
        "gpu_count",
        "gpus",
        "info",
        "last_prefix",
        "name",
        "node",
        "recipe",
        "shown",
        "up",
    )

    @classmethod
    def of(cls, node: NodeState, shown: _Shown) -> _NodeLines:
        """The node's lines of what its facts show (`_shown`)."""
        s, gpus = shown
        lines = cls()
        lines.node, lines.name = s.name, escape(s.name)
        lines.facts, lines.shown = node.facts, shown
        lines.drift_key = None
        lines.findings = lines.recipe = lines.drift = b""
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
        lines.render_connected(node.connected)
        lines.last_prefix = f'{LAST_REPORT[0]}{{node="{lines.name}"}} '
        lines.gpus = b"".join(
            _line("plumb_gpu_info", {"node": s.name, **labels}, 1.0) for labels in gpus
        )
        return lines

    def stack(self) -> tuple[bytes, ...]:
        """The lines of each STACK family."""
        return (
            self.info,
            self.gpu_count,
            self.connected,
            self.gpus,
            self.findings,
            self.recipe,
            self.drift,
        )

    def render_connected(self, up: bool) -> None:
        """The connected line, 1 while the node's agent has a stream open."""
        self.up = up
        self.connected = _line("plumb_agent_connected", {"node": self.node}, 1.0 if up else 0.0)

    def render_drift(self, resolution: object, findings: tuple) -> None:
        """The findings, recipe and drift lines, for the node's recipe and open findings."""
        self.drift_key = (resolution, findings)
        counts = dict.fromkeys(SEVERITIES, 0)
        for f in findings:
            counts[f.severity] += 1
        self.findings = b"".join(
            _line("plumb_node_findings", {"node": self.node, "severity": sev}, float(n))
            for sev, n in counts.items()
        )
        self.drift = b"".join(
            _line(
                "plumb_node_drift",
                {"node": f.node, "kind": f.kind, "component": f.component, "severity": f.severity},
                1.0,
            )
            for f in findings
        )
        if resolution is None:
            self.recipe = b""
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


# What a node's fact lines show: its summary, connection and report time set aside (they
# have lines of their own), and each GPU's plumb_gpu_info labels.
_Shown = tuple[NodeSummary, tuple[dict[str, str], ...]]


def _shown(node: NodeState) -> _Shown:
    summary = replace(NodeSummary.of(node), connected=False, last_report_at=None)
    gpus = tuple(
        {  # dcgm-exporter's join labels, beside Plumb's `node`
            "gpu": str(g.value("index")),
            "UUID": g.text("uuid") or "",
            "pci_bus_id": g.text("pci_bus_id") or "",
            "model_name": g.text("name") or "",
        }
        for g in node.gpus()
    )
    return summary, gpus


def _line(name: str, labels: dict[str, str], value: float) -> bytes:
    """One sample line, labels sorted by name as prometheus_client writes them."""
    return f"{name}{{{label_text(labels)}}} {floatToGoString(value)}\n".encode()
