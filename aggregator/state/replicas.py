"""Which replica exports what: the live replicas, as the replica tail last saw them.

Metrics come from one place, so Prometheus never double counts (intake/replicas.py): a
node's series from the replica holding or last holding its stream while that replica is
alive, else the first live replica by name; cluster-wide series from the first live replica.
"""

from __future__ import annotations

from plumb.aggregator.state.live import NodeState

__all__ = ["Membership"]


class Membership:
    """This replica's name and the live replicas; with `tailing` False (SQLite: one process)
    this replica exports everything."""

    def __init__(self, name: str, *, tailing: bool):
        self.name = name
        self.tailing = tailing
        # Set by the replica tail at every poll.
        self.alive: frozenset[str] = frozenset({name})

    @property
    def leader(self) -> str:
        """The first live replica by name: it exports cluster-wide series and orphaned nodes."""
        return min(self.alive)

    def exports(self, node: NodeState) -> bool:
        """Whether this replica exports `node`'s series."""
        if not self.tailing:
            return True
        owner = node.owner if node.owner in self.alive else None
        return (owner or self.leader) == self.name

    def exports_cluster(self) -> bool:
        """Whether this replica exports the cluster-wide series."""
        return not self.tailing or self.leader == self.name
