"""The aggregator's side of the Connect stream: one task per agent, applying its facts in order.

Protocol: Hello -> Welcome, `resumed` when the Hello's content_sha256 is that of the facts
held for the node (the agent then sends no FullFacts; after a restart that is nearly every
agent, and a resumed stream takes no syncing slot); FullFacts -> Ack; FactsDelta -> Ack, or
Resync on a seq gap, before any FullFacts, or on a hash that disagrees after applying it;
Heartbeat -> Resync when its hash differs; SensorReport -> nothing (the latest readings are
kept, a changes-only report applied to the stream's last ones; one before any FullFacts is
ignored, as the node does not exist yet), or, when it carries a heartbeat's seq and
content_sha256 (Welcome said ReportSettings.sensors_heartbeat), what a Heartbeat gets as
well, the readings kept either way. A malformed message, or one
that breaks a bound or goes back in seq (aggregator/ingest/limits.py), aborts the stream
with INVALID_ARGUMENT, and one over the size limit with RESOURCE_EXHAUSTED, before
anything is stored. A stream beyond the streams syncing at once is welcomed and waits its
turn, its FullFacts unread (ingest/syncing.py). A Hello beyond what the aggregator takes at
all (the line of waiting streams full, too many new names) gets RESOURCE_EXHAUSTED with a
retry hint in the trailing metadata (limits.RETRY_AFTER_KEY), before Welcome. The transport
itself refuses messages over four times the limit; those end the stream without reaching
this code.

Hello is authenticated (ingest/auth.py) before the stream is registered, so an agent
that may not report for a node can neither report for it nor supersede its stream.

Transport only: what a message changes in the live state goes through the intake
(intake/intake.py); errors map to gRPC statuses through `errors.STATUS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

import grpc
from google.protobuf.message import DecodeError

from plumb import facts as wire
from plumb.aggregator.errors import (
    STATUS,
    Forbidden,
    InvalidInput,
    RateLimited,
    TooLarge,
    Unavailable,
)
from plumb.aggregator.ingest import limits
from plumb.aggregator.ingest.auth import Authenticator
from plumb.aggregator.ingest.streams import Session, Streams
from plumb.aggregator.ingest.syncing import Busy, Syncing
from plumb.aggregator.intake.intake import Intake, StreamStart
from plumb.aggregator.metrics.collectors import IngestMetrics
from plumb.aggregator.pacing import Pacer
from plumb.aggregator.settings import IngestSettings
from plumb.aggregator.state.live import LiveState, utcnow
from plumb.aggregator.store import Writer
from plumb.aggregator.validation import Validator
from plumb.aggregator.validation.wire import agent_result
from plumb.sensors import GpuSensors
from plumb.v1 import agent_pb2, agent_pb2_grpc, facts_pb2

log = logging.getLogger(__name__)


class Ingest(agent_pb2_grpc.AgentServiceServicer):
    """Reads every agent's stream in order and hands what it says to the intake."""

    def __init__(
        self,
        streams: Streams,
        intake: Intake,
        state: LiveState,
        writer: Writer,
        validator: Validator,
        settings: IngestSettings,
        metrics: IngestMetrics,
        auth: Authenticator,
        clock: Callable[[], datetime] = utcnow,
        pacer: Pacer | None = None,
    ):
        self._streams = streams
        self._intake = intake
        self._state = state  # read only: the held facts a resend or a delta is checked against
        self._writer = writer  # read only: how far it has written, for Ack.durable_seq
        # CheckResults go to validation, and so does a stream's end (what it owed fails).
        self._validator = validator
        self._auth = auth
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        # Each FullFacts is parsed, hashed and evaluated in a turn of the pacer, so new
        # streams are taken between syncs (aggregator/pacing.py).
        self._pacer = pacer or Pacer(settings.sync_duty)
        self._new_names = limits.NewNodeNames(settings.max_new_nodes_per_minute)
        self._syncing = Syncing(
            settings.min_syncing_streams,
            settings.max_syncing_streams,
            settings.sync_target_s,
            max_waiting=settings.max_waiting_streams,
        )
        metrics.syncing.set_function(lambda: len(self._syncing))
        metrics.waiting.set_function(lambda: self._syncing.waiting)

    async def Connect(self, request_iterator, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        session: Session | None = None
        failure: tuple[grpc.StatusCode, str, str] | None = None
        retry_after_s: int | None = None
        drain: asyncio.Task | None = None
        slot: object | None = None  # held from Hello until the first facts are applied
        try:
            hello = await self._read(context, self._settings.hello_timeout_s)
            if hello is None:
                return
            hello_at = time.perf_counter()
            self._pacer.arrived()
            name = limits.check_hello(hello, self._settings)
            await self._auth.check(name, _bearer(context.invocation_metadata()))
            if self._state.get(name) is None and name not in self._streams:
                self._new_names.admit(name)
            resumed = self._resumable(name, hello.hello.content_sha256)
            if resumed is None:
                slot = self._syncing.admit()
            session = self._open(hello.hello)
            if resumed is not None:
                self._resume(session, resumed)
            await context.write(
                agent_pb2.ConnectResponse(
                    welcome=agent_pb2.Welcome(
                        session_id=session.id,
                        report_settings=agent_pb2.ReportSettings(
                            heartbeat_interval_s=self._settings.heartbeat_interval_s,
                            sensors_heartbeat=True,
                            sensor_changes=True,
                        ),
                        resumed=resumed is not None,
                    )
                )
            )
            self._metrics.reply.labels(type="hello").observe(time.perf_counter() - hello_at)
            drain = asyncio.create_task(self._drain(session, context))
            if slot is not None:
                await self._syncing.granted(slot)  # its FullFacts waits unread meanwhile
            while (msg := await self._read(context, self._settings.idle_timeout_s)) is not None:
                read_at = time.perf_counter()
                if msg.WhichOneof("message") == "full_facts":
                    async with self._pacer.turn():
                        reply = self._handle(session, msg)
                else:
                    reply = self._handle(session, msg)
                if slot is not None and session.has_facts:
                    self._syncing.done(slot)
                    slot = None
                if reply is not None:
                    async with session.write_lock:
                        await context.write(reply)
                    took = time.perf_counter() - read_at
                    self._metrics.reply.labels(type=msg.WhichOneof("message")).observe(took)
        except Forbidden as exc:
            failure = (STATUS[exc.code][1], str(exc), "forbidden")
        except Unavailable as exc:
            failure = (STATUS[exc.code][1], str(exc), "auth_unavailable")
        except RateLimited as exc:
            reason = "busy" if isinstance(exc, Busy) else "new_node_rate"
            failure = (STATUS[exc.code][1], f"{exc}; {exc.hint}", reason)
            retry_after_s = exc.retry_after_s
        except TooLarge as exc:
            failure = (STATUS[exc.code][1], str(exc), "oversized")
        except InvalidInput as exc:
            reason = exc.reason if isinstance(exc, limits.Refused) else "invalid_input"
            failure = (STATUS[exc.code][1], str(exc), reason)
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
            if slot is not None:
                self._syncing.done(slot)
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
            if retry_after_s is not None:
                context.set_trailing_metadata(((limits.RETRY_AFTER_KEY, str(retry_after_s)),))
            await context.abort(code, message)

    async def _drain(self, session: Session, context: grpc.aio.ServicerContext) -> None:
        """Write what the aggregator queued for this stream, between replies to reads."""
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
            raise TooLarge(
                f"{kind} message of {size} bytes exceeds the "
                f"{self._settings.max_message_bytes}-byte limit"
            )
        return msg

    def _open(self, hello: agent_pb2.Hello) -> Session:
        """Register an authenticated stream; a newer stream for the node supersedes the old."""
        session, superseded = self._streams.open(
            hello.node_name, hello.boot_id or None, hello.agent_version or None
        )
        if superseded:
            self._metrics.superseded.inc()
        log.info(
            "stream opened", extra={"node": hello.node_name, "agent_version": hello.agent_version}
        )
        return session

    def _resumable(self, name: str, raw_digest: bytes) -> str | None:
        """The digest of Hello's content_sha256 when the node's held facts are of it and the
        store has room to mark it connected: the stream resumes, with no FullFacts and no
        syncing slot (after a restart nearly every agent's facts are as stored). None when
        the agent sends FullFacts; Refused for a digest that is not 32 bytes."""
        if not raw_digest:
            return None
        digest = limits.digest("Hello", raw_digest)
        if not self._state.resent_by(name, digest) or not self._writer.room_for(name):
            return None
        return digest

    def _resume(self, session: Session, digest: str) -> None:
        """Connect the node on this stream with its held facts as seq 0, as a FullFacts
        resending them would (`_resumable` found room, in the same step of the loop)."""
        held = self._state.get(session.node)
        assert held is not None
        self._intake.report(session.node, 0, held.reported, digest, _start(session))
        session.has_facts = True
        self._metrics.resumed.inc()

    def _close(self, session: Session) -> None:
        """The stream ended: whatever it owed fails, and its node is down unless a newer
        stream has reported since (whichever stream ended last)."""
        self._validator.stream_closed(session.node, session.id)
        self._streams.close(session)
        self._intake.disconnected(session.node, session.id)
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
            limits.check_heartbeat(msg.heartbeat, session.seq)
            return self._heartbeat(session, "Heartbeat", msg.heartbeat.content_sha256)
        if kind == "sensors":
            return self._sensors(session, msg.sensors)
        if kind == "check_result":
            self._validator.check_result(session.node, agent_result(msg.check_result))
            return None
        raise InvalidInput(f"unexpected message on an open stream: {kind or 'empty'}")

    def _full(self, session: Session, full: agent_pb2.FullFacts) -> agent_pb2.ConnectResponse:
        limits.check_full(full, session.seq if session.has_facts else None, self._settings)
        digest = limits.digest("FullFacts", full.content_sha256)
        held = self._state.get(session.node)
        if held is not None and self._state.resent_by(session.node, digest):
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
        start = None if session.has_facts else _start(session)
        ticket = self._intake.report(session.node, full.seq, flat, digest, start)
        if ticket is None:
            return self._store_full(session)
        session.seq, session.has_facts, session.awaiting_full = full.seq, True, False
        return self._ack(session, full.seq, ticket)

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
            held = self._state.get(session.node)
            reported = held.reported if held is not None else {}
            new = wire.apply_delta(reported, changed, list(delta.removed))
        except wire.FactsError as exc:
            raise limits.malformed("FactsDelta", exc) from exc
        if delta.seq != session.seq + 1:
            return self._resync(
                session, "seq_gap", f"expected seq {session.seq + 1}, got {delta.seq}"
            )
        if wire.content_hash(new) != digest:
            return self._resync(session, "hash_mismatch", "facts differ after applying the delta")
        ticket = self._intake.report(session.node, delta.seq, new, digest)
        if ticket is None:
            return self._store_full(session)
        session.seq = delta.seq
        return self._ack(session, delta.seq, ticket)

    def _heartbeat(
        self,
        session: Session,
        kind: str,
        raw_digest: bytes,
        gpus: tuple[GpuSensors, ...] | None = None,
    ) -> agent_pb2.ConnectResponse | None:
        """A heartbeat, or a SensorReport standing in for one with its readings `gpus`: the
        node is alive and its facts are as held, or Resync when its hash says otherwise. The
        readings are kept whatever the hash says (they are no facts)."""
        if session.awaiting_full:
            reply = None
        elif not session.has_facts:  # before the node exists: nothing is created for it
            return self._resync(session, "no_full_facts", f"a {kind} arrived before FullFacts")
        else:
            digest = limits.digest(kind, raw_digest)
            held = self._state.get(session.node)
            if held is not None and digest == held.content_hash:
                self._intake.heartbeat(session.node, session.id, gpus)
                return None
            reply = self._resync(session, "hash_mismatch", f"{kind} hash differs from held facts")
        if gpus is not None:
            self._intake.sensors(session.node, session.id, gpus)
        return reply

    def _sensors(
        self, session: Session, report: facts_pb2.SensorReport
    ) -> agent_pb2.ConnectResponse | None:
        gpus = session.sensors = limits.check_sensors(
            report, session.seq, self._settings, session.sensors
        )
        if report.content_sha256:
            return self._heartbeat(session, "SensorReport", report.content_sha256, gpus)
        if not session.has_facts:
            log.debug("sensors before facts, ignored", extra={"node": session.node})
            return None
        self._intake.sensors(session.node, session.id, gpus)
        return None

    def _resync(self, session: Session, reason: str, detail: str) -> agent_pb2.ConnectResponse:
        session.awaiting_full = True
        self._metrics.resyncs.labels(reason=reason).inc()
        log.info("resync requested", extra={"node": session.node, "reason": detail})
        return agent_pb2.ConnectResponse(resync=agent_pb2.Resync(reason=detail))

    def _ack(self, session: Session, seq: int, ticket: int) -> agent_pb2.ConnectResponse:
        """Ack `seq`, saying which of this stream's changes the database holds by now."""
        session.unstored.append((ticket, seq))
        done = self._writer.done
        while session.unstored and session.unstored[0][0] <= done:
            session.durable_seq = session.unstored.popleft()[1]
        return agent_pb2.ConnectResponse(
            ack=agent_pb2.Ack(seq=seq, durable_seq=session.durable_seq)
        )

    def _store_full(self, session: Session) -> agent_pb2.ConnectResponse:
        log.warning("store queue full, facts refused", extra={"node": session.node})
        return self._resync(session, "store_full", "the aggregator's write queue is full")


def _start(session: Session) -> StreamStart:
    return StreamStart(session.id, session.boot_id, session.agent_version)


def _bearer(metadata: tuple | None) -> str | None:
    """The token of an `authorization: Bearer TOKEN` metadata entry, if any."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value.removeprefix("Bearer ").strip() or None
    return None
