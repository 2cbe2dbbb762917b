"""The one door into the live state: every change of a node's facts, connection or baseline.

Four sources change what the aggregator holds of a node: its agent's stream (ingest), the
Kubernetes API (the Node object, the GPU stack's workloads), other replicas' writes read back
from the shared database, and the store at start-up. Each enters here and nowhere else. For
every change the intake hands the node to the evaluator, gets back the drift transitions it
decided, and submits the facts and the node's own transitions to the writer as one update,
so the database never holds a fact change without the verdict it caused (or the reverse).
Sensor readings are the exception that proves it: kept as the latest value alone, never
evaluated, never written.

A change is taken only if the writer has room for it; otherwise memory keeps what the store
has and the caller asks the agent to resync. Transitions alone are never refused (a resync
cannot bring them back), see `store/writer.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from plumb.aggregator.drift import Baseline, DriftFinding, Observation, Transitions
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.state.live import LiveState, NodeState, Sensors
from plumb.aggregator.state.stack import stack_hash
from plumb.aggregator.store import Change, NodeUpdate, StoredNode, Writer
from plumb.facts import Reading, diff
from plumb.sensors import GpuSensors

log = logging.getLogger(__name__)

__all__ = ["Intake", "StreamStart"]


@dataclass(frozen=True)
class StreamStart:
    """Who opened the stream whose first facts these are."""

    session_id: str
    boot_id: str | None
    agent_version: str | None


class Intake:
    """Applies every change of the live state, evaluates it and queues it for the store."""

    def __init__(
        self,
        state: LiveState,
        writer: Writer,
        evaluator: Evaluator,
        count: Callable[[Transitions], None],
        touched: Callable[[str], None],
        clock: Callable[[], datetime],
        *,
        seen: Callable[[str], None],
        sensed: Callable[[str], None],
        replica: str,
        write_heartbeats: bool,
        keep_history: bool,
    ):
        self._state = state
        self._writer = writer
        self._evaluator = evaluator
        self._count = count
        # Told each node whose facts, connection, report time or verdicts changed, after the
        # change (metrics render the node's lines then, not at every scrape); `seen` of a node
        # whose report time alone moved (a heartbeat: one line and one field to swap), and
        # `sensed` only of new readings, which nothing but the sensor gauges shows.
        self._touched = touched
        self._seen = seen
        self._sensed = sensed
        self._clock = clock
        self._replica = replica  # named as the owner of the nodes streaming here
        # Only where other replicas read the database do they need each heartbeat's time.
        self._write_heartbeats = write_heartbeats
        # Whether a removed node's history and findings stay in the database.
        self._keep_history = keep_history

    # -- the agent's stream ------------------------------------------------------------------

    def report(
        self,
        name: str,
        seq: int,
        reported: dict[str, Reading],
        digest: str,
        start: StreamStart | None = None,
    ) -> int | None:
        """Make `reported` the node's facts (with the cluster's overlay): the writer's ticket
        for the change (`Writer.done` reaches it once stored), or None, and nothing changed,
        when the store cannot take it now. `start` marks the first facts of a stream: the
        node is connected from then on."""
        if not self._writer.room_for(name):
            return None
        now = self._clock()
        node = self._state.node(name, now)
        # A node's very first facts are its starting point, not a change: they are stored but
        # not as history, which would otherwise hold every fact of every node.
        starting = not node.facts
        merged = self._state.merged(name, reported)
        changes = () if starting else _changes(node.facts, merged)
        written = starting or bool(changes)
        update = NodeUpdate(
            node=name,
            at=now,
            changes=changes,
            facts=merged if written else None,
            facts_own=(merged is reported) if written else None,
            last_report_at=now,
            content_hash=digest,
        )
        if start is not None:
            update = replace(
                update, connected=True, boot_id=start.boot_id, agent_version=start.agent_version
            )
            node.connected, node.session_id, node.owner = True, start.session_id, self._replica
            node.boot_id, node.agent_version = start.boot_id, start.agent_version
        node.facts, node.reported, node.content_hash = merged, reported, digest
        node.reported_verified = True
        node.seq, node.last_report_at = seq, now
        return self._commit(node, update, evaluate=bool(changes or (starting and merged)))

    def heartbeat(
        self,
        name: str,
        session_id: str | None = None,
        gpus: tuple[GpuSensors, ...] | None = None,
    ) -> None:
        """The node's agent is alive; its facts are as held. A SensorReport standing in for
        the heartbeat brings `gpus`, kept as `sensors` keeps them."""
        node = self._state.get(name)
        if node is None:
            return
        node.last_report_at = self._clock()
        if gpus is not None and node.session_id == session_id:
            node.sensors = Sensors(node.last_report_at, gpus)
            self._sensed(name)
        self._seen(name)
        if self._write_heartbeats:
            # Other replicas judge the node's connection by its last report; a dropped one is
            # counted by the writer and the next heartbeat makes up for it.
            self._writer.submit(
                NodeUpdate(node=name, at=node.last_report_at, last_report_at=node.last_report_at)
            )

    def sensors(self, name: str, session_id: str, gpus: tuple[GpuSensors, ...]) -> None:
        """Keep `gpus` as the node's latest readings, if `session_id` is its open stream.

        Readings are gauges, not facts: nothing is written, diffed or evaluated, so sensor
        noise costs the aggregator one assignment per report."""
        node = self._state.get(name)
        if node is None or node.session_id != session_id:
            return
        node.sensors = Sensors(self._clock(), gpus)
        self._sensed(name)

    def disconnected(self, name: str, session_id: str) -> None:
        """The stream `session_id` of node `name` ended; the node is down if it was its last.

        Its sensor readings go with the stream: a stale gauge would lie."""
        node = self._state.get(name)
        if node is None or node.session_id != session_id:
            return
        node.connected, node.session_id, node.sensors = False, None, None
        self._state.changed()
        self._touched(name)
        self._submit(NodeUpdate(node=name, at=self._clock(), connected=False))

    # -- the Kubernetes API ------------------------------------------------------------------

    def cluster_facts(
        self,
        name: str | None,
        facts: Mapping[str, Reading] | None,
        fill: Mapping[str, Reading] | None = None,
    ) -> None:
        """Overlay what the cluster says of node `name` (every node when None) on its facts;
        `fill` facts only where the agent has no reading (LiveState.merged).

        A node no agent reported yet gets them with its first facts.
        """
        self._state.set_cluster_facts(name, facts, fill)
        nodes = list(self._state.nodes()) if name is None else [self._state.get(name)]
        for node in nodes:
            if node is None or not node.facts:
                continue
            merged = self._state.merged(node.name, node.reported)
            changes = _changes(node.facts, merged)
            if not changes:
                continue
            if not self._writer.room_for(node.name):
                # Memory keeps what the store has; the next cluster event or report retries.
                log.warning("store queue full, cluster facts deferred", extra={"node": node.name})
                continue
            node.facts = merged
            update = NodeUpdate(
                node=node.name,
                at=self._clock(),
                changes=changes,
                facts=merged,
                facts_own=merged is node.reported,
            )
            self._commit(node, update)

    # -- people --------------------------------------------------------------------------------

    def accept_baseline(self, node: NodeState) -> Baseline:
        """Make the node's current stack its baseline, and close what that settles."""
        baseline = self._evaluator.drift.accept_baseline(node.name, node.facts)
        self._commit(node, NodeUpdate(node=node.name, at=self._clock(), baseline=baseline))
        return baseline

    def remove(self, node: NodeState) -> None:
        """Forget a node that no longer streams: live state, recipe, open findings (closed),
        and, through the writer after whatever it still holds for the node, its rows: its
        history kept or dropped as configured."""
        removal = NodeUpdate(
            node=node.name, at=self._clock(), removed=True, keep_history=self._keep_history
        )
        self._forget(node.name, removal)
        log.info("node removed", extra={"node": node.name})

    def remote_removed(self, name: str) -> None:
        """Forget a node another replica removed; that replica wrote its rows."""
        if self._state.get(name) is not None:
            self._forget(name, None)
            log.info("node removed by another replica", extra={"node": name})

    def _forget(self, name: str, removal: NodeUpdate | None) -> None:
        """Drop ``name`` from the live state and the evaluator; submit ``removal`` with the
        node's own transitions, and its pool mates' transitions as their own updates."""
        self._state.remove(name)
        transitions = self._evaluator.forget(name)
        self._touched(name)
        if removal is not None:
            own = [t for t in transitions if t.node == name]
            self._writer.submit(_with_transitions(removal, own) if own else removal)
        for t in transitions:
            if t.node != name:
                self._writer.submit(
                    NodeUpdate(node=t.node, at=self._clock(), opened=t.opened, closed=t.closed)
                )
                self._touched(t.node)
            self._count(t)
            _log(t)

    def expire(self, now: datetime, after: timedelta) -> list[str]:
        """Remove the nodes whose agents have not reported for `after`; their names."""
        gone = [
            n
            for n in self._state.nodes()
            if not n.connected and n.last_report_at is not None and now - n.last_report_at > after
        ]
        for node in gone:
            self.remove(node)
        return [n.name for n in gone]

    # -- validation ----------------------------------------------------------------------------

    def benchmark_findings(self, observations: Mapping[str, list[Observation]]) -> None:
        """Open and close every known node's straggler and regression findings from what its
        figures say now (a node absent from `observations` has none), after a validation."""
        changed = False
        for node in self._state.nodes():
            resolution = self._evaluator.resolutions.get(node.name)
            t = self._evaluator.drift.evaluate_benchmarks(
                node.name,
                observations.get(node.name, []),
                resolution.content_hash if resolution is not None else "",
            )
            if not t:
                continue
            changed = True
            self._writer.submit(
                NodeUpdate(node=t.node, at=self._clock(), opened=t.opened, closed=t.closed)
            )
            self._count(t)
            _log(t)
            self._touched(t.node)
        if changed:
            self._state.changed()

    # -- the store: start-up and other replicas ----------------------------------------------

    def restore(
        self,
        stored: Iterable[StoredNode],
        findings: Iterable[DriftFinding],
        baselines: Mapping[str, Baseline],
    ) -> list[NodeState]:
        """Load the nodes, open findings and baselines the store holds; the nodes count as
        disconnected until they stream, and are evaluated by `evaluate_restored`."""
        self._evaluator.drift.restore(findings, baselines)
        return [
            self._state.restore(
                n.name,
                n.facts,
                boot_id=n.boot_id,
                agent_version=n.agent_version,
                first_seen_at=n.first_seen_at,
                last_report_at=n.last_report_at,
                content_hash=n.content_hash or "",
                owner=n.owner,
                own=bool(n.facts_own),
            )
            for n in stored
        ]

    async def evaluate_restored(self, nodes: list[NodeState], chunk: int = 100) -> None:
        """Hash and evaluate restored nodes, `chunk` at a time, yielding to the loop between
        chunks so agents reconnect meanwhile; findings that still hold keep their times."""
        for i, node in enumerate(nodes, 1):
            if node.facts:
                node.ensure_hash()
                self._commit(node, None)
            else:
                self._touched(node.name)
            if i % chunk == 0:
                await asyncio.sleep(0)

    def remote_row(self, row: StoredNode) -> None:
        """Take the connection and identity of a node another replica wrote."""
        node = self._state.get(row.name) or self._state.node(row.name, row.first_seen_at)
        node.owner, node.connected = row.owner, row.connected
        node.boot_id, node.agent_version = row.boot_id, row.agent_version
        node.last_report_at = row.last_report_at
        self._state.changed()
        self._touched(row.name)

    def remote_contents(
        self,
        name: str,
        facts: dict[str, Reading] | None,
        content_hash: str | None,
        baseline: Baseline | None,
    ) -> None:
        """Take the facts and/or baseline another replica stored for the node, and evaluate.

        Stored facts may carry the cluster's overlay: `reported` is checked before a
        reconnect here relies on it (NodeState.resent_by).
        """
        node = self._state.get(name)
        if node is None:
            return
        if facts is not None:
            node.facts = node.reported = facts
            node.content_hash, node.reported_verified = content_hash or "", False
        if baseline is not None:
            self._evaluator.drift.baselines[name] = baseline
        self._state.changed()
        if node.facts:
            self._commit(node, None)
        else:
            self._touched(name)

    def adopt(self, findings: Iterable[DriftFinding]) -> None:
        """Take the stored copies of findings another replica stored first (ids, times)."""
        self._evaluator.drift.adopt(findings)

    def expire_remote(self, now: datetime, idle: timedelta) -> None:
        """Disconnect remote nodes whose last report is older than `idle`."""
        expired = False
        for node in self._state.nodes():
            if node.connected and node.owner != self._replica:
                if node.last_report_at is None or now - node.last_report_at > idle:
                    node.connected, expired = False, True
                    self._touched(node.name)
        if expired:
            self._state.changed()

    # -- one update per change -----------------------------------------------------------------

    def _commit(self, node: NodeState, update: NodeUpdate | None, *, evaluate: bool = True) -> int:
        """Evaluate `node` (when asked) and submit `update` with the node's own transitions;
        other nodes' transitions (its pool mates') follow as their own updates. The ticket of
        the node's own update."""
        self._state.changed()
        if evaluate:
            stack = stack_hash(node.facts, self._evaluator.drift.rules.baseline.paths)
            if stack != node.stack_hash:
                node.stack_hash, node.stack_since = stack, self._clock()
        transitions = self._evaluator.node_changed(node) if evaluate else []
        self._touched(node.name)
        own = [t for t in transitions if t.node == node.name]
        if own:
            update = _with_transitions(update or NodeUpdate(node=node.name, at=self._clock()), own)
        if update is not None:
            self._writer.submit(update)  # the caller made sure there is room
        ticket = self._writer.submitted
        for t in transitions:
            if t.node != node.name:
                self._writer.submit(
                    NodeUpdate(node=t.node, at=self._clock(), opened=t.opened, closed=t.closed)
                )
                self._touched(t.node)
            self._count(t)
            _log(t)
        return ticket

    def _submit(self, update: NodeUpdate) -> None:
        if not self._writer.submit(update):
            log.warning("store queue full, update dropped", extra={"node": update.node})


def _with_transitions(update: NodeUpdate, transitions: list[Transitions]) -> NodeUpdate:
    baseline = next((t.baseline for t in transitions if t.baseline), None) or update.baseline
    return replace(
        update,
        opened=update.opened + tuple(f for t in transitions for f in t.opened),
        closed=update.closed + tuple(f for t in transitions for f in t.closed),
        baseline=baseline,
    )


def _changes(old: Mapping[str, Reading], new: Mapping[str, Reading]) -> tuple[Change, ...]:
    """The store's change rows from `old` facts to `new`."""
    if old is new:  # a resend of the facts held, with no cluster overlay: nothing to compare
        return ()
    changed, removed = diff(old, new)
    return tuple(Change(p, old.get(p), r) for p, r in changed.items()) + tuple(
        Change(p, old[p], None) for p in removed
    )


def _log(t: Transitions) -> None:
    for f in t.opened:
        log.info(
            "drift opened",
            extra={
                "node": f.node,
                "kind": f.kind,
                "component": f.component,
                "severity": f.severity,
                "observed": f.observed,
            },
        )
    for f in t.closed:
        log.info("drift closed", extra={"node": f.node, "kind": f.kind, "component": f.component})
