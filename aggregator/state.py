"""The live snapshot: every node's current facts and connection, in memory, keyed by name.

Ingest is the only writer (one task per stream, so a node's updates apply in order);
the API and metrics read it. `generation` increases on every change so readers can
cache whatever they derive from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from plumb.facts import Reading

__all__ = ["LiveState", "NodeState", "NodeSummary"]

T = TypeVar("T")


@dataclass
class NodeState:
    """One node as the aggregator holds it now."""

    name: str
    facts: dict[str, Reading] = field(default_factory=dict)
    content_hash: str = ""
    seq: int = 0
    connected: bool = False
    session_id: str | None = None
    # The replica holding the node's stream, or the last one that did (aggregator/replicas.py).
    owner: str | None = None
    boot_id: str | None = None
    agent_version: str | None = None
    first_seen_at: datetime | None = None
    last_report_at: datetime | None = None
    # What derived() computed from `facts`; facts dicts are replaced, never edited in place,
    # so the memo holds while `_memo_of is facts`.
    _memo: dict = field(default_factory=dict, repr=False, compare=False)
    _memo_of: dict | None = field(default=None, repr=False, compare=False)

    def derived(self, key: str, compute: Callable[[NodeState], T]) -> T:
        """`compute(self)`, cached until the node's facts are replaced (lists, scrapes)."""
        if self._memo_of is not self.facts:
            self._memo, self._memo_of = {}, self.facts
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]

    def value(self, path: str) -> str | int | float | bool | None:
        """The value at `path` when it was read successfully, else None."""
        reading = self.facts.get(path)
        return reading.value if reading is not None and reading.status == "ok" else None

    def gpu_count(self) -> int:
        return self.derived("gpu_count", _gpu_count)

    def gpu_product(self) -> str | None:
        """The product name when every GPU has the same one, else the names joined by ' + '."""
        return self.derived("gpu_product", _gpu_product)


@dataclass(frozen=True)
class NodeSummary:
    """The few facts shown per node in lists and `_info` metrics."""

    name: str
    connected: bool
    last_report_at: datetime | None
    driver_version: str | None
    cuda_driver_version: str | None
    gpu_count: int
    gpu_product: str | None
    kernel: str | None
    os: str | None

    @classmethod
    def of(cls, node: NodeState) -> NodeSummary:
        os_id, os_version = node.value("host.os_id"), node.value("host.os_version_id")
        return cls(
            name=node.name,
            connected=node.connected,
            last_report_at=node.last_report_at,
            driver_version=_str(node.value("driver.driver_version")),
            cuda_driver_version=_str(node.value("driver.cuda_driver_version")),
            gpu_count=node.gpu_count(),
            gpu_product=node.gpu_product(),
            kernel=_str(node.value("host.kernel")),
            os=f"{os_id} {os_version}" if os_id and os_version else _str(os_id),
        )


def _gpu_count(node: NodeState) -> int:
    return sum(1 for p in node.facts if p.startswith("gpus[") and p.endswith("].index"))


def _gpu_product(node: NodeState) -> str | None:
    names = sorted({str(node.value(f"gpus[{i}].name")) for i in range(node.gpu_count())} - {"None"})
    return " + ".join(names) if names else None


def _str(value: object) -> str | None:
    return None if value is None else str(value)


class LiveState:
    """All nodes, by name."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeState] = {}
        self.generation = 0

    def __contains__(self, name: str) -> bool:
        return name in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, name: str) -> NodeState | None:
        return self._nodes.get(name)

    def nodes(self) -> Iterator[NodeState]:
        """Nodes sorted by name."""
        return iter(sorted(self._nodes.values(), key=lambda n: n.name))

    def node(self, name: str, at: datetime) -> NodeState:
        """The node called `name`, created (first seen `at`) when new."""
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = NodeState(name=name, first_seen_at=at)
        return node

    def changed(self) -> None:
        """Tell readers that something they may have cached is stale."""
        self.generation += 1

    def restore(self, name: str, facts: Mapping[str, Reading], **attrs: object) -> NodeState:
        """Load a node from the store at start-up; it counts as disconnected until it streams."""
        node = NodeState(name=name, facts=dict(facts), **attrs)  # type: ignore[arg-type]
        node.connected = False
        self._nodes[name] = node
        self.changed()
        return node
