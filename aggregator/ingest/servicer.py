"""The aggregator's side of the Connect stream: one task per agent, applying its facts in order.

Protocol: Hello -> Welcome; FullFacts -> Ack; FactsDelta -> Ack, or Resync on a seq gap,
before any FullFacts, or on a hash that disagrees after applying it; Heartbeat -> Resync
when its hash differs. A malformed message, or one that breaks a bound or goes back in seq
(aggregator/ingest/limits.py), aborts the stream with INVALID_ARGUMENT, and one over the
size limit with RESOURCE_EXHAUSTED, before anything is stored. The transport itself refuses messages
over four times the limit; those end the stream without reaching this code.

Hello is authenticated (aggregator/ingest/auth.py) before the stream is registered, so an agent
that may not report for a node can neither report for it nor supersede its stream.

Two streams for one node name: the newer one wins and the older is aborted with
ABORTED. A restarted agent whose old TCP connection is still half-open must not be
locked out for an idle timeout; two agents fighting over one name show up as
`plumb_ingest_streams_superseded_total` climbing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import grpc
from google.protobuf.message import DecodeError

from plumb import facts as wire
from plumb.aggregator.errors import Forbidden, InvalidInput, RateLimited, Unavailable
from plumb.aggregator.ingest import limits
from plumb.aggregator.ingest.auth import Authenticator
from plumb.aggregator.metrics.collectors import IngestMetrics
from plumb.aggregator.settings import IngestSettings
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.store import Change, NodeUpdate, Writer
from plumb.aggregator.validation.wire import AgentResult, agent_result
from plumb.v1 import agent_pb2, agent_pb2_grpc

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Oversized(InvalidInput):
    """A message over the policy limit (the transport refuses far larger ones itself)."""


@dataclass
class Session:
    """One open stream."""

    id: str
    node: str
    task: asyncio.Task | None
    boot_id: str | None = None
    agent_version: str | None = None
    seq: int = 0
    has_facts: bool = False
    awaiting_full: bool = False
    # Why the aggregator cancelled this stream: "superseded" or "shutdown".
    ended_by: str | None = None
    # Messages the aggregator starts (RunChecks), drained by the stream's writer task;
    # bounded: a full queue refuses the message rather than growing.
    outbound: asyncio.Queue | None = None
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Ingest(agent_pb2_grpc.AgentServiceServicer):
    """Applies every agent's stream to the live state and queues the changes for the store."""

    def __init__(
        self,
        state: LiveState,
        writer: Writer,
        settings: IngestSettings,
        metrics: IngestMetrics,
        auth: Authenticator,
        clock: Callable[[], datetime] = utcnow,
        replica: str | None = None,
        write_heartbeats: bool = False,
    ):
        self._state = state
        self._replica = replica  # named as the owner of the nodes streaming here
        # Only where other replicas read the database do they need each heartbeat's time.
        self._write_heartbeats = write_heartbeats
        self._auth = auth
        self._writer = writer
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._new_names = limits.NewNodeNames(settings.max_new_nodes_per_minute)
        # Called with the node after each change of its facts, in the stream's task.
        self.on_facts: Callable[[NodeState], None] = lambda node: None
        # Called with (node, result) for each CheckResult, and (node, session id) when a
        # stream ends, so validation can route results and fail what a closed stream owed.
        self.on_check_result: Callable[[str, AgentResult], None] = lambda node, result: None
        self.on_stream_closed: Callable[[str, str], None] = lambda node, session: None

    def send(self, node: str, msg: agent_pb2.ConnectResponse) -> str | None:
        """Queue `msg` on the node's open stream; the session id, or None (no stream, full)."""
        session = self._sessions.get(node)
        if session is None or session.outbound is None:
            return None
        try:
            session.outbound.put_nowait(msg)
        except asyncio.QueueFull:
            log.warning("outbound queue full", extra={"node": node})
            return None
        return session.id

    @property
    def connected(self) -> int:
        return len(self._sessions)

    def close_all(self) -> None:
        """End every stream now with UNAVAILABLE, so agents reconnect elsewhere at once."""
        for session in list(self._sessions.values()):
            session.ended_by = "shutdown"
            if session.task is not None:
                session.task.cancel()

    async def Connect(self, request_iterator, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        session: Session | None = None
        failure: tuple[grpc.StatusCode, str, str] | None = None
        drain: asyncio.Task | None = None
        try:
            hello = await self._read(context, self._settings.hello_timeout_s)
            if hello is None:
                return
            name = limits.check_hello(hello, self._settings)
            await self._auth.check(name, _bearer(context.invocation_metadata()))
            if self._state.get(name) is None and name not in self._sessions:
                self._new_names.admit(name)
            session = self._open(hello.hello)
            await context.write(
                agent_pb2.ConnectResponse(
                    welcome=agent_pb2.Welcome(
                        session_id=session.id,
                        report_settings=agent_pb2.ReportSettings(
                            heartbeat_interval_s=self._settings.heartbeat_interval_s
                        ),
                    )
                )
            )
            session.outbound = asyncio.Queue(maxsize=self._settings.outbound_queue_max)
            drain = asyncio.create_task(self._drain(session, context))
            while (msg := await self._read(context, self._settings.idle_timeout_s)) is not None:
                reply = self._handle(session, msg)
                if reply is not None:
                    async with session.write_lock:
                        await context.write(reply)
        except Forbidden as exc:
            failure = (grpc.StatusCode.PERMISSION_DENIED, str(exc), "forbidden")
        except Unavailable as exc:
            failure = (grpc.StatusCode.UNAVAILABLE, str(exc), "auth_unavailable")
        except RateLimited as exc:
            failure = (grpc.StatusCode.RESOURCE_EXHAUSTED, f"{exc}; {exc.hint}", "new_node_rate")
        except _Oversized as exc:
            failure = (grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), "oversized")
        except InvalidInput as exc:
            reason = exc.reason if isinstance(exc, limits.Refused) else "invalid_input"
            failure = (grpc.StatusCode.INVALID_ARGUMENT, str(exc), reason)
        except TimeoutError:
            failure = (grpc.StatusCode.DEADLINE_EXCEEDED, "no message within the timeout", "idle")
        except asyncio.CancelledError:
            if session is None or session.ended_by is None:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            failure = (
                (grpc.StatusCode.ABORTED, "superseded by a newer stream", "superseded")
                if session.ended_by == "superseded"
                else (grpc.StatusCode.UNAVAILABLE, "aggregator shutting down", "shutdown")
            )
        finally:
            if drain is not None:
                drain.cancel()  # it holds nothing: no need to wait for it to finish
            if session is not None:
                self._close(session)
        if failure is not None:
            code, message, reason = failure
            self._metrics.rejected.labels(reason=reason).inc()
            log.warning(
                "stream closed",
                extra={
                    "node": session.node if session else None,
                    "code": code.name,
                    "reason": message,
                },
            )
            await context.abort(code, message)

    async def _drain(self, session: Session, context: grpc.aio.ServicerContext) -> None:
        """Write what the aggregator queued for this stream, between replies to reads."""
        assert session.outbound is not None
        while True:
            msg = await session.outbound.get()
            async with session.write_lock:
                await context.write(msg)

    async def _read(
        self, context: grpc.aio.ServicerContext, timeout_s: float
    ) -> agent_pb2.ConnectRequest | None:
        try:
            async with asyncio.timeout(timeout_s):
                msg = await context.read()
        except DecodeError as exc:
            raise limits.undecodable(exc) from exc
        if msg is grpc.aio.EOF:
            return None
        kind = msg.WhichOneof("message") or "empty"
        size = msg.ByteSize()
        self._metrics.messages.labels(type=kind).inc()
        self._metrics.received_bytes.inc(size)
        if size > self._settings.max_message_bytes:
            raise _Oversized(
                f"{kind} message of {size} bytes exceeds the "
                f"{self._settings.max_message_bytes}-byte limit"
            )
        return msg

    def _open(self, hello: agent_pb2.Hello) -> Session:
        """Register an authenticated stream; a newer stream for the node supersedes the old."""
        name = hello.node_name
        old = self._sessions.get(name)
        if old is not None:
            old.ended_by = "superseded"
            if old.task is not None:
                old.task.cancel()
            self._metrics.superseded.inc()
            log.warning("stream superseded", extra={"node": name, "old_session": old.id})
        session = Session(
            id=uuid.uuid4().hex,
            node=name,
            task=asyncio.current_task(),
            boot_id=hello.boot_id or None,
            agent_version=hello.agent_version or None,
        )
        self._sessions[name] = session
        log.info("stream opened", extra={"node": name, "agent_version": hello.agent_version})
        return session

    def _close(self, session: Session) -> None:
        self.on_stream_closed(session.node, session.id)
        if self._sessions.get(session.node) is not session:
            return  # superseded: the newer stream owns the node now
        del self._sessions[session.node]
        node = self._state.get(session.node)
        if node is not None and node.session_id == session.id:
            node.connected, node.session_id = False, None
            self._state.changed()
            self._submit(NodeUpdate(node=session.node, at=self._clock(), connected=False))
        log.info("stream ended", extra={"node": session.node})

    def _handle(
        self, session: Session, msg: agent_pb2.ConnectRequest
    ) -> agent_pb2.ConnectResponse | None:
        kind = msg.WhichOneof("message")
        if kind == "full_facts":
            return self._full(session, msg.full_facts)
        if kind == "delta":
            return self._delta(session, msg.delta)
        if kind == "heartbeat":
            return self._heartbeat(session, msg.heartbeat)
        if kind == "check_result":
            self.on_check_result(session.node, agent_result(msg.check_result))
            return None
        raise InvalidInput(f"unexpected message on an open stream: {kind or 'empty'}")

    def _full(self, session: Session, full: agent_pb2.FullFacts) -> agent_pb2.ConnectResponse:
        limits.check_full(full, session.seq if session.has_facts else None, self._settings)
        digest = limits.digest("FullFacts", full.content_sha256)
        held = self._state.get(session.node)
        if held is not None and held.resent_by(digest):
            # A reconnect resending what is held: the hash says the facts are equal, so skip
            # parsing them (most of a reconnect storm's cost); nothing of the payload is kept.
            flat = held.reported
        else:
            try:
                flat = wire.flatten(full.facts)
            except wire.FactsError as exc:
                raise limits.malformed("FullFacts", exc) from exc
            if wire.content_hash(flat) != digest:
                raise InvalidInput("FullFacts content_sha256 does not match its facts")
        first = not session.has_facts
        if not self._apply(session, full.seq, flat, digest, first=first):
            return self._store_full(session)
        session.seq, session.has_facts, session.awaiting_full = full.seq, True, False
        return _ack(full.seq)

    def _delta(
        self, session: Session, delta: agent_pb2.FactsDelta
    ) -> agent_pb2.ConnectResponse | None:
        limits.check_delta(delta, session.seq, self._settings)
        if session.awaiting_full:
            return None  # in flight before our Resync; the FullFacts that follows supersedes it
        digest = limits.digest("FactsDelta", delta.content_sha256)
        if not session.has_facts:
            return self._resync(session, "no_full_facts", "a delta arrived before FullFacts")
        try:
            changed = {path: wire.from_fact(path, fact) for path, fact in delta.changed.items()}
            for path in delta.removed:
                if len(path) > wire.MAX_PATH_CHARS:
                    raise wire.FactsError(
                        f"removed path longer than {wire.MAX_PATH_CHARS}", reason="string_too_long"
                    )
            node = self._state.node(session.node, self._clock())
            new = wire.apply_delta(node.reported, changed, list(delta.removed))
        except wire.FactsError as exc:
            raise limits.malformed("FactsDelta", exc) from exc
        if delta.seq != session.seq + 1:
            return self._resync(
                session, "seq_gap", f"expected seq {session.seq + 1}, got {delta.seq}"
            )
        if wire.content_hash(new) != digest:
            return self._resync(session, "hash_mismatch", "facts differ after applying the delta")
        if not self._apply(session, delta.seq, new, digest):
            return self._store_full(session)
        session.seq = delta.seq
        return _ack(delta.seq)

    def _heartbeat(
        self, session: Session, beat: agent_pb2.Heartbeat
    ) -> agent_pb2.ConnectResponse | None:
        limits.check_heartbeat(beat, session.seq)
        if session.awaiting_full:
            return None
        if not session.has_facts:  # before the node exists: nothing is created for it
            return self._resync(session, "no_full_facts", "a heartbeat arrived before FullFacts")
        digest = limits.digest("Heartbeat", beat.content_sha256)
        node = self._state.node(session.node, self._clock())
        if digest != node.content_hash:
            return self._resync(session, "hash_mismatch", "heartbeat hash differs from held facts")
        node.last_report_at = self._clock()
        if self._write_heartbeats:
            # Other replicas judge the node's connection by its last report; a dropped one is
            # counted by the writer and the next heartbeat makes up for it.
            self._writer.submit(
                NodeUpdate(
                    node=session.node, at=node.last_report_at, last_report_at=node.last_report_at
                )
            )
        return None

    def _resync(self, session: Session, reason: str, detail: str) -> agent_pb2.ConnectResponse:
        session.awaiting_full = True
        self._metrics.resyncs.labels(reason=reason).inc()
        log.info("resync requested", extra={"node": session.node, "reason": detail})
        return agent_pb2.ConnectResponse(resync=agent_pb2.Resync(reason=detail))

    def _apply(
        self,
        session: Session,
        seq: int,
        new: dict[str, wire.Reading],
        digest: str,
        *,
        first: bool = False,
    ) -> bool:
        """Make `new` the node's facts, if the store can take the change; False if not.

        The update is queued before the live state changes, so memory never holds a change
        the database will not get: a full queue leaves both as they were, for a resync.
        """
        now = self._clock()
        node: NodeState = self._state.node(session.node, now)
        # A node's very first facts are its starting point, not a change: they go to the facts
        # table but not to the history, which would otherwise hold every fact of every node.
        starting = not node.facts
        merged = self._state.merged(session.node, new)
        changes = _changes(node.facts, merged)
        update = NodeUpdate(
            node=session.node,
            at=now,
            changes=changes,
            last_report_at=now,
            history=not starting,
            content_hash=digest,
        )
        if first:
            update = replace(
                update, connected=True, boot_id=session.boot_id, agent_version=session.agent_version
            )
        if not self._writer.submit(update):
            return False
        node.facts, node.reported, node.content_hash = merged, new, digest
        node.reported_verified = True
        node.seq, node.last_report_at = seq, now
        if first:
            node.connected, node.session_id, node.owner = True, session.id, self._replica
            node.boot_id, node.agent_version = session.boot_id, session.agent_version
        self._state.changed()
        if changes:
            self.on_facts(node)
        return True

    def set_cluster_facts(
        self,
        name: str | None,
        facts: Mapping[str, wire.Reading] | None,
        fill: Mapping[str, wire.Reading] | None = None,
    ) -> None:
        """Overlay what the cluster says of node `name` (every node when None) on its facts;
        `fill` facts only where the agent has no reading (LiveState.merged).

        The changes are stored and re-evaluated like an agent's; a node no agent reported yet
        gets them with its first facts.
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
            if not self._writer.submit(
                NodeUpdate(node=node.name, at=self._clock(), changes=changes)
            ):
                # Memory keeps what the store has; the next cluster event or report retries.
                log.warning("store queue full, cluster facts deferred", extra={"node": node.name})
                continue
            node.facts = merged
            self._state.changed()
            self.on_facts(node)

    def _store_full(self, session: Session) -> agent_pb2.ConnectResponse:
        log.warning("store queue full, facts refused", extra={"node": session.node})
        return self._resync(session, "store_full", "the aggregator's write queue is full")

    def _submit(self, update: NodeUpdate) -> None:
        if not self._writer.submit(update):
            log.warning("store queue full, update dropped", extra={"node": update.node})


def _changes(
    old: Mapping[str, wire.Reading], new: Mapping[str, wire.Reading]
) -> tuple[Change, ...]:
    """The store's change rows from `old` facts to `new`."""
    if old is new:  # a resend of the facts held, with no cluster overlay: nothing to compare
        return ()
    changed, removed = wire.diff(old, new)
    return tuple(Change(p, old.get(p), r) for p, r in changed.items()) + tuple(
        Change(p, old[p], None) for p in removed
    )


def _bearer(metadata: tuple | None) -> str | None:
    """The token of an `authorization: Bearer TOKEN` metadata entry, if any."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value.removeprefix("Bearer ").strip() or None
    return None


def _ack(seq: int) -> agent_pb2.ConnectResponse:
    return agent_pb2.ConnectResponse(ack=agent_pb2.Ack(seq=seq))
