"""The live snapshot: every node's current facts and connection, in memory, keyed by name.

The intake (intake/intake.py) is the only writer, in the task of the source that changed
the node (one per agent stream, so a node's updates apply in order); everything else reads
it. A node's `facts` are what its agent reported (`reported`, which its content hash covers)
overlaid with what the cluster says of it (the Node object, the GPU stack's workloads), so
recipes and drift see both. `generation` increases on every change so readers can cache
whatever they derive from it. A node's `sensors` are its GPUs' latest readings, held only
while its agent streams: not facts, so they change no generation, hash or derived view.
A node's `stack_hash` (state/stack.py) names its versions and inventory, and `stack_since`
says since when it has run them, so a check result can say whether it ran on today's stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from plumb.aggregator.state.views import GpuView, gpu_views
from plumb.facts import Reading, content_hash
from plumb.sensors import GpuSensors

__all__ = ["LiveState", "NodeState", "NodeSummary", "Sensors", "utcnow"]

T = TypeVar("T")


def utcnow() -> datetime:
    """The clock every part of the aggregator reads (tests pass their own)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Sensors:
    """A node's latest sensor readings, and when the aggregator received them."""

    at: datetime
    gpus: tuple[GpuSensors, ...]


@dataclass
class NodeState:
    """One node as the aggregator holds it now."""

    name: str
    facts: dict[str, Reading] = field(default_factory=dict)
    # The agent's own facts, which `content_hash` covers and its deltas apply to.
    reported: dict[str, Reading] = field(default_factory=dict)
    content_hash: str = ""
    # False for a node restored from the store with facts that may carry an earlier cluster
    # overlay: `reported` is checked against the hash before a resend relies on it
    # (LiveState.resent_by takes the overlay off where it does not match).
    reported_verified: bool = True
    seq: int = 0
    connected: bool = False
    session_id: str | None = None
    # The replica holding the node's stream, or the last one that did (intake/replicas.py).
    owner: str | None = None
    boot_id: str | None = None
    agent_version: str | None = None
    first_seen_at: datetime | None = None
    last_report_at: datetime | None = None
    # The stack it runs (state/stack.py) and when the intake first saw it; "" / None until
    # the node's facts were evaluated.
    stack_hash: str = ""
    stack_since: datetime | None = None
    # The latest SensorReport of the node's open stream; None once it ends.
    sensors: Sensors | None = None
    # What derived() computed from `facts`; facts dicts are replaced, never edited in place,
    # so the memo holds while `_memo_of is facts`.
    _memo: dict = field(default_factory=dict, repr=False, compare=False)
    _memo_of: dict | None = field(default=None, repr=False, compare=False)

    def ensure_hash(self) -> None:
        """Set `content_hash` from the facts if it is unset (a node restored from the store)."""
        if self.facts and not self.content_hash:
            self.content_hash = content_hash(self.facts)

    def resent_by(self, digest: str) -> bool:
        """Whether a FullFacts hashed `digest` repeats `reported`, so it need not be parsed."""
        self.ensure_hash()
        if not self.reported or digest != self.content_hash:
            return False
        if not self.reported_verified:
            self.reported_verified = content_hash(self.reported) == digest
        return self.reported_verified

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

    def gpus(self) -> tuple[GpuView, ...]:
        """The node's GPUs, grouped once per facts version."""
        return self.derived("gpus", lambda node: gpu_views(node.facts))

    def gpu_count(self) -> int:
        return len(self.gpus())

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


def _gpu_product(node: NodeState) -> str | None:
    names = sorted({name for g in node.gpus() if (name := g.text("name")) is not None})
    return " + ".join(names) if names else None


def _str(value: object) -> str | None:
    return None if value is None else str(value)


class LiveState:
    """All nodes, by name."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeState] = {}
        # Facts the cluster gives every node, and each node's own (from its Node object).
        self._cluster_wide: dict[str, Reading] = {}
        self._cluster: dict[str, dict[str, Reading]] = {}
        self._fill: dict[str, dict[str, Reading]] = {}
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

    def remove(self, name: str) -> None:
        """Forget node `name`, and what the cluster said of it."""
        self._nodes.pop(name, None)
        self._cluster.pop(name, None)
        self._fill.pop(name, None)
        self.changed()

    def changed(self) -> None:
        """Tell readers that something they may have cached is stale."""
        self.generation += 1

    def restore(
        self, name: str, facts: Mapping[str, Reading], *, own: bool = False, **attrs: object
    ) -> NodeState:
        """Load a node from the store at start-up; it counts as disconnected until it streams.

        `own`: the store holds the facts as the agent's own, no cluster overlay in them, so
        its content hash covers them without a check. Without a stored content hash,
        `NodeState.ensure_hash` computes it when first needed.
        """
        stored = dict(facts)  # one dict for both: neither is ever edited in place
        node = NodeState(
            name=name,
            facts=stored,
            reported=stored,
            reported_verified=own,
            **attrs,  # type: ignore[arg-type]
        )
        node.connected = False
        self._nodes[name] = node
        self.changed()
        return node

    def resent_by(self, name: str, digest: str) -> bool:
        """Whether facts hashed `digest` repeat node `name`'s reported facts (a FullFacts
        resending them need not be parsed, a Hello naming them resumes).

        Facts restored from the store carry the cluster's overlay as it was: without the
        paths the cluster sets now, they are the agent's own if they hash as `digest`, and
        become the node's `reported`. A path the overlay replaced hashes apart: no match."""
        node = self._nodes.get(name)
        if node is None:
            return False
        if node.resent_by(digest):
            return True
        overlay = self._cluster.get(name, {}).keys() | self._cluster_wide.keys()
        if not overlay or digest != node.content_hash:
            return False
        own = {path: r for path, r in node.reported.items() if path not in overlay}
        if content_hash(own) != digest:
            return False
        node.reported, node.reported_verified = own, True
        return True

    def merged(self, name: str, reported: dict[str, Reading]) -> dict[str, Reading]:
        """`reported` overlaid with the cluster's facts of node `name`. The cluster wins (the
        API server is the authority on kubelet, labels and workloads), except for its `fill`
        facts, which only stand in where the agent has no ok reading of its own. `reported`
        itself where the cluster adds nothing: the intake stores that as the agent's own."""
        own = self._cluster.get(name)
        fill = self._fill.get(name)
        if not own and not fill and not self._cluster_wide:
            return reported
        out = {**reported, **self._cluster_wide, **(own or {})}
        for path, reading in (fill or {}).items():
            held = reported.get(path)
            if held is None or held.status != "ok":
                out[path] = reading
        return out

    def set_cluster_facts(
        self,
        name: str | None,
        facts: Mapping[str, Reading] | None,
        fill: Mapping[str, Reading] | None = None,
    ) -> None:
        """Replace the cluster's facts of node `name` (every node when None), and the ones
        that only `fill` the agent's gaps; None clears them."""
        if name is None:
            self._cluster_wide = dict(facts or {})
            return
        for target, given in ((self._cluster, facts), (self._fill, fill)):
            if given:
                target[name] = dict(given)
            else:
                target.pop(name, None)
