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

from plumb.aggregator.intake.intake import Intake
from plumb.aggregator.settings import ReplicaSettings
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.state.replicas import Membership
from plumb.aggregator.store import Store, StoredNode, StoreError

log = logging.getLogger(__name__)

__all__ = ["Replicas"]


class Replicas:
    """The tail of the other replicas' node writes, taken in through the intake; keeps
    `membership` (who is alive, so who exports what) current.

    With `membership.tailing` False (SQLite: one process) nothing is read.
    """

    def __init__(
        self,
        settings: ReplicaSettings,
        membership: Membership,
        *,
        idle_timeout_s: float,
        store: Store,
        state: LiveState,
        intake: Intake,
        clock: Callable[[], datetime],
        loaded: list[StoredNode],
    ) -> None:
        self.name = settings.name
        self.membership = membership
        self._settings = settings
        self._idle = timedelta(seconds=idle_timeout_s)
        self._store = store
        self._state = state
        self._intake = intake
        self._clock = clock
        # What this replica holds of each node: the row's changed_at, the content's stamp.
        # The facts were loaded at start; the first poll reads every row for its connection
        # (start-up marks every node disconnected, though other replicas may hold some).
        self._seen: dict[str, datetime | None] = {}
        self._facts_at = {n.name: n.facts_changed_at for n in loaded}
        self._baseline_at = {n.name: n.baseline_changed_at for n in loaded}
        self._cursor: datetime | None = None

    async def run(self) -> None:
        """Poll until cancelled (at once when not tailing); a failing database is logged and
        retried at the next poll."""
        if not self.membership.tailing:
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
        self.membership.alive = frozenset(n for n, at in seen.items() if now - at <= window) | {
            self.name
        }
        overlap = timedelta(seconds=self._settings.overlap_s)
        since = None if self._cursor is None else self._cursor - overlap
        rows = await asyncio.to_thread(self._store.changed_nodes, since)
        fresh = []
        for row in rows:
            if not self._fresh(row):
                continue
            theirs = row.changed_by != self.name and not self._held(row.name)
            if row.removed:
                if theirs:
                    self._intake.remote_removed(row.name)
                continue
            fresh.append(row)
            if theirs:
                self._intake.remote_row(row)
        facts_of = [r.name for r in fresh if self._facts_moved(r)]
        baselines_of = [r.name for r in fresh if self._baseline_moved(r)]
        if facts_of or baselines_of:
            await self._reload(fresh, facts_of, baselines_of)
        if since is not None:  # at start the engine holds the stored rows already
            found = await asyncio.to_thread(self._store.findings_opened_since, since)
            self._intake.adopt(found)
        self._intake.expire_remote(now, self._idle)

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

    async def _reload(
        self, rows: list[StoredNode], facts_of: list[str], baselines_of: list[str]
    ) -> None:
        """Load the facts and baselines that moved and evaluate those nodes."""
        facts, baselines = await asyncio.to_thread(self._store.contents, facts_of, baselines_of)
        for row in rows:
            if row.name not in facts and row.name not in baselines:
                continue
            held = self._held(row.name)
            if row.name in facts and not held:
                self._facts_at[row.name] = row.facts_changed_at
            if row.name in baselines:
                self._baseline_at[row.name] = row.baseline_changed_at
            self._intake.remote_contents(
                row.name,
                facts.get(row.name) if not held else None,
                row.content_hash,
                baselines.get(row.name),
            )
        log.debug("took other replicas' changes", extra={"nodes": len(facts) + len(baselines)})
