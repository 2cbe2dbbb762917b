"""Several aggregator replicas on one PostgreSQL: each reads back what the others changed.

The database is the shared truth. Each replica holds the nodes whose agents stream to it and
writes them through its writer. Every `poll_interval_s` it reads the node rows the others
wrote since its last poll (by `changed_at`, re-reading `overlap_s` back), takes their
connection and last report, reloads facts and baseline where the content moved, and
evaluates them like its own nodes, so recipes, drift and every read agree across replicas
within about one poll. A remote node counts as connected while its row says so and its
last report (heartbeats are written) is within the ingest idle timeout, so a replica killed
outright does not leave its nodes connected forever.

Drift findings both evaluate are stored once by the database (a unique index on open
findings, store/drift.py); each replica then adopts the stored row, so ids and opening
times agree too.

Metrics come from one place, so Prometheus never double counts: a node's series (and its
drift transitions) from its *exporter*, the replica holding or last holding its stream
while that replica is alive, else the first live replica by name; cluster-wide series from
the first live replica by name. Liveness is a row per replica, refreshed every poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.settings import ReplicaSettings
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.store import Store, StoredNode, StoreError

log = logging.getLogger(__name__)

__all__ = ["Replicas"]


class Replicas:
    """This replica's view of the others: the tail of their node writes, and who exports what.

    With `tailing` False (SQLite: one process) nothing is read and this replica exports all.
    """

    def __init__(
        self,
        settings: ReplicaSettings,
        *,
        tailing: bool,
        idle_timeout_s: float,
        store: Store,
        state: LiveState,
        evaluator: Evaluator,
        clock: Callable[[], datetime],
        loaded: list[StoredNode],
    ) -> None:
        self.name = settings.name
        self.tailing = tailing
        self.alive: frozenset[str] = frozenset({self.name})
        self._settings = settings
        self._idle = timedelta(seconds=idle_timeout_s)
        self._store = store
        self._state = state
        self._evaluator = evaluator
        self._clock = clock
        # What this replica holds of each node: the row's changed_at, the content's stamp.
        # The facts were loaded at start; the first poll reads every row for its connection
        # (start-up marks every node disconnected, though other replicas may hold some).
        self._seen: dict[str, datetime | None] = {}
        self._facts_at = {n.name: n.facts_changed_at for n in loaded}
        self._baseline_at = {n.name: n.baseline_changed_at for n in loaded}
        self._cursor: datetime | None = None

    @property
    def leader(self) -> str:
        """The first live replica by name: it exports cluster-wide series and orphaned nodes."""
        return min(self.alive)

    def exports(self, node: NodeState) -> bool:
        """Whether this replica exports `node`'s series (see the module docstring)."""
        if not self.tailing:
            return True
        owner = node.owner if node.owner in self.alive else None
        return (owner or self.leader) == self.name

    def exports_cluster(self) -> bool:
        """Whether this replica exports the cluster-wide series."""
        return not self.tailing or self.leader == self.name

    async def run(self) -> None:
        """Poll until cancelled (at once when not tailing); a failing database is logged and
        retried at the next poll."""
        if not self.tailing:
            return
        while True:
            try:
                await self.poll()
            except StoreError as exc:
                log.warning("reading other replicas' changes failed", extra={"error": str(exc)})
            await asyncio.sleep(self._settings.poll_interval_s)

    async def poll(self) -> None:
        """Record this replica alive, then take in what the others changed since last time."""
        now = self._clock()
        seen = await asyncio.to_thread(self._store.see_replica, now)
        window = timedelta(seconds=self._settings.alive_s)
        self.alive = frozenset(n for n, at in seen.items() if now - at <= window) | {self.name}
        overlap = timedelta(seconds=self._settings.overlap_s)
        since = None if self._cursor is None else self._cursor - overlap
        rows = await asyncio.to_thread(self._store.changed_nodes, since)
        fresh = [row for row in rows if self._fresh(row)]
        for row in fresh:
            if row.changed_by != self.name:
                self._take(row)
        facts_of = [r.name for r in fresh if self._facts_moved(r)]
        baselines_of = [r.name for r in fresh if self._baseline_moved(r)]
        if facts_of or baselines_of:
            await self._reload(fresh, facts_of, baselines_of)
        if since is not None:  # at start the engine holds the stored rows already
            found = await asyncio.to_thread(self._store.findings_opened_since, since)
            self._evaluator.drift.adopt(found)
        if self._expire(now) or fresh:
            self._state.changed()

    def _fresh(self, row: StoredNode) -> bool:
        """Whether `row` was written since this replica last read it; moves the cursor."""
        if row.changed_at is not None and (self._cursor is None or row.changed_at > self._cursor):
            self._cursor = row.changed_at
        if self._seen.get(row.name) == row.changed_at:
            return False
        self._seen[row.name] = row.changed_at
        return True

    def _facts_moved(self, row: StoredNode) -> bool:
        """Whether the node's facts changed elsewhere; a node streaming here has the newest."""
        return not self._held(row.name) and self._facts_at.get(row.name) != row.facts_changed_at

    def _baseline_moved(self, row: StoredNode) -> bool:
        """Whether another replica accepted a baseline for the node since last read."""
        if row.baseline_changed_by == self.name:
            self._baseline_at[row.name] = row.baseline_changed_at
            return False
        return self._baseline_at.get(row.name) != row.baseline_changed_at

    def _held(self, name: str) -> bool:
        """Whether the node's agent streams to this replica: its memory is the truth then."""
        node = self._state.get(name)
        return node is not None and node.connected and node.owner == self.name

    def _take(self, row: StoredNode) -> None:
        """Take the connection and identity of a node another replica wrote."""
        if self._held(row.name):
            return
        node = self._state.get(row.name) or self._state.node(row.name, row.first_seen_at)
        node.owner, node.connected = row.owner, row.connected
        node.boot_id, node.agent_version = row.boot_id, row.agent_version
        node.last_report_at = row.last_report_at

    async def _reload(
        self, rows: list[StoredNode], facts_of: list[str], baselines_of: list[str]
    ) -> None:
        """Load the facts and baselines that moved and evaluate those nodes."""
        facts, baselines = await asyncio.to_thread(self._store.contents, facts_of, baselines_of)
        for row in rows:
            node = self._state.get(row.name)
            if node is None or (row.name not in facts and row.name not in baselines):
                continue
            if row.name in facts and not self._held(row.name):
                self._facts_at[row.name] = row.facts_changed_at
                # Stored facts may carry the cluster's overlay: `reported` is checked before
                # a reconnect here relies on it (NodeState.resent_by).
                node.facts = node.reported = facts[row.name]
                node.content_hash, node.reported_verified = row.content_hash or "", False
            if row.name in baselines:
                self._baseline_at[row.name] = row.baseline_changed_at
                self._evaluator.drift.baselines[row.name] = baselines[row.name]
            if node.facts:
                self._evaluator.node_changed(node)
        log.debug("took other replicas' changes", extra={"nodes": len(facts) + len(baselines)})

    def _expire(self, now: datetime) -> bool:
        """Disconnect remote nodes whose last report is older than the idle timeout."""
        expired = False
        for node in self._state.nodes():
            if node.connected and node.owner != self.name:
                if node.last_report_at is None or now - node.last_report_at > self._idle:
                    node.connected, expired = False, True
        return expired
