"""The agent's side of the Connect stream: hello, full facts, deltas, heartbeats, resyncs.

One connection at a time. Full facts go out once per connection (and on Resync), then
only deltas; a heartbeat carries the content hash so the aggregator can tell when it
has lost track. Hello carries the hash of the last facts sent, on any stream: when the
aggregator's Welcome says it holds those (`resumed`, as after its own restart), the full
facts stay home and the first poll, at once, sends what changed since as a delta. Sensor
readings travel apart: a SensorReport every `sensor_interval_s`, once the session has sent
(or resumed) its full facts, never hashed; after a stream's first, only what moved, where
the aggregator's Welcome says it takes that (ReportSettings.sensor_changes). Where it says
it takes them so (ReportSettings.sensors_heartbeat), each report also carries what a
heartbeat would, and stands in for it: a node with readings sends one message per interval,
not two, and heartbeats only when no report went out.
A session's polls and its reports each keep an interval from the second on; the gap between
the first and the second is drawn from [interval/2, 3 interval/2) (`spread`). Agents
welcomed together (an aggregator restart, a rack powering on) otherwise send together at
every interval after, and the aggregator takes the whole fleet's reports in bursts. A
resumed session's first report waits a draw over one interval (`stagger`): after an
aggregator restart the fleet resumes within seconds, and readings at once would put its
every report in the seconds its reconnects need.
Connections are retried forever: once the aggregator accepts TCP again, after a delay
drawn from a window that doubles per failed attempt (capped), so a fleet comes back
within about one window of an aggregator restart, and not in lockstep. An aggregator that
answers Hello with RESOURCE_EXHAUSTED and a retry hint is busy, not failing: the agent waits
out the hint (plus a little jitter) and tries again without widening its window; so does
one that answers UNAVAILABLE with a hint while it is still starting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from plumb import facts as wire
from plumb.agent.checks import CheckRunner
from plumb.agent.settings import StreamSettings
from plumb.sensors import GpuSensors, changes_proto
from plumb.sensors import to_proto as sensors_proto
from plumb.v1 import agent_pb2, agent_pb2_grpc

log = logging.getLogger(__name__)

CAPABILITIES = ("facts.delta.v1", "checks.v1")
# Trailing metadata of a RESOURCE_EXHAUSTED or UNAVAILABLE: whole seconds to wait before the
# next Hello (plumb/v1/agent.proto, Connect; aggregator/ingest/syncing.py and port.py set it).
RETRY_AFTER_KEY = "plumb-retry-after-s"
# RunChecks requests queued behind the one running; more are answered `error` at once.
_MAX_PENDING_CHECK_REQUESTS = 8

Collect = Callable[[], dict[str, wire.Reading]]
Sense = Callable[[], list[GpuSensors]]
T = TypeVar("T")


@dataclass(frozen=True)
class Identity:
    """Who this agent says it is in Hello."""

    node_name: str
    agent_version: str
    boot_id: str


class StreamClient:
    """Keeps one node's facts mirrored at the aggregator until `stop` is set."""

    def __init__(
        self,
        target: str,
        identity: Identity,
        collect: Collect,
        settings: StreamSettings,
        checks: CheckRunner | None = None,
        token: Callable[[], str | None] | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        server_name: str | None = None,
        sense: Sense | None = None,
    ):
        self._target = target
        self._credentials = credentials
        self._server_name = server_name
        self._token = token
        self._checks = checks
        self._identity = identity
        self._collect = collect
        self._sense = sense
        self._settings = settings
        self._heartbeat_s = settings.heartbeat_interval_s
        self._sensors_beat = False  # whether this session's SensorReports stand in for heartbeats
        self._resync = asyncio.Event()
        # The last facts written, on any stream, and their digest: what Hello offers to resume.
        self._sent: tuple[dict[str, wire.Reading], bytes] | None = None
        self._resumed = False  # whether this session's Welcome took them as held
        self.connections = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, stream, and reconnect until `stop` is set, all on one channel.

        After a stream ends or an attempt fails, the next attempt first waits until the
        aggregator accepts a connection again (gRPC reconnects the channel, its tries at
        most `probe_max_s` apart), then `reconnect_delay` (full jitter over a bounded
        window), so a fleet comes back promptly after an aggregator restart but not in
        lockstep. The channel lives as long as the client, as gRPC advises, and gRPC makes
        the connection under it again; only a Welcome that never came gets a new channel.
        """
        failures = 0  # attempts in a row that reached the aggregator but got no Welcome
        retrying = False
        retry_after_s: float | None = None  # the aggregator's hint on its last refusal
        channel = self._channel()
        try:
            while not stop.is_set():
                opened = self.connections
                # Only a probed attempt is known to have reached the aggregator: the first is
                # not probed, so its failure (often just "not listening yet") does not widen
                # the window.
                reached = retrying
                try:
                    if retrying:
                        reached = await _reachable(
                            channel, stop, self._settings.unreachable_retry_s
                        )
                        if stop.is_set():
                            return
                        if reached:
                            delay = (
                                reconnect_delay(self._settings, failures)
                                if retry_after_s is None
                                else pushback_delay(retry_after_s)
                            )
                            log.info("reconnecting", extra={"delay_s": round(delay, 2)})
                            if await _stopped(stop, delay):
                                return
                        # else: try anyway, so why it cannot connect (refused, TLS) is logged
                    retry_after_s = None
                    await self._session(channel, stop)
                except grpc.aio.AioRpcError as exc:
                    retry_after_s = _retry_after_s(exc)
                    extra = {
                        "code": exc.code().name,
                        "details": exc.details(),
                        "target": self._target,
                    }
                    if status_lost(exc):
                        extra["note"] = LOST_STATUS_NOTE
                    log.warning("stream closed", extra=extra)
                except TimeoutError:
                    log.warning("no Welcome in time", extra={"target": self._target})
                    # The connection may be gone without a word (a host lost, a stale route),
                    # which gRPC, sending no pings, would not notice: dial on a new channel.
                    await channel.close()
                    channel = self._channel()
                except (ConnectionError, OSError) as exc:
                    log.warning("stream failed", extra={"error": str(exc), "target": self._target})
                if self.connections > opened:
                    failures = 0
                elif reached and retry_after_s is None:
                    failures += 1
                retrying = True
        finally:
            await channel.close()

    def _channel(self) -> grpc.aio.Channel:
        """A TLS channel when credentials were given, checking the certificate for
        `server_name` when given; else plaintext."""
        options = _channel_options(self._settings)
        if self._credentials is None:
            return grpc.aio.insecure_channel(self._target, options=options)
        if self._server_name is not None:
            options.append(("grpc.ssl_target_name_override", self._server_name))
        return grpc.aio.secure_channel(self._target, self._credentials, options=options)

    async def _session(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        """One stream, from Hello until it fails or `stop` is set."""
        # Re-read on a thread for each stream (projected tokens rotate); none to read, no thread.
        token = await asyncio.to_thread(self._token) if self._token is not None else None
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(metadata=metadata)
        try:
            await self._stream(call, stop)
        finally:
            call.cancel()  # however it ended: the channel outlives the call

    async def _stream(self, call: grpc.aio.StreamStreamCall, stop: asyncio.Event) -> None:
        """Hello, Welcome, then report until the stream fails or `stop` is set."""
        ident = self._identity
        await call.write(
            agent_pb2.ConnectRequest(
                hello=agent_pb2.Hello(
                    node_name=ident.node_name,
                    agent_version=ident.agent_version,
                    boot_id=ident.boot_id,
                    capabilities=CAPABILITIES,
                    content_sha256=self._sent[1] if self._sent else b"",
                )
            )
        )
        first = await asyncio.wait_for(call.read(), timeout=self._settings.welcome_timeout_s)
        if first is grpc.aio.EOF or first.WhichOneof("message") != "welcome":
            raise ConnectionError("aggregator did not answer Hello with Welcome")
        welcome = first.welcome
        if welcome.report_settings.heartbeat_interval_s > 0:
            self._heartbeat_s = welcome.report_settings.heartbeat_interval_s
        self._sensors_beat = welcome.report_settings.sensors_heartbeat and self._sense is not None
        # The readings of this stream's last SensorReport, where the aggregator takes changes.
        self._sensor_changes = welcome.report_settings.sensor_changes
        self._sensors_sent: list[GpuSensors] | None = None
        self._resumed = welcome.resumed and self._sent is not None
        self.connections += 1
        log.info(
            "stream opened",
            extra={
                "session": welcome.session_id,
                "target": self._target,
                "resumed": self._resumed,
            },
        )
        self._resync.clear()
        # The reporter, the sensor and the check task all write; gRPC allows one at a time.
        self._write_lock = asyncio.Lock()
        # Facts and sensors are read on worker threads, one read of the node at a time.
        self._reading = asyncio.Lock()
        self._facts_sent = asyncio.Event()
        # (seq, digest) of the last facts message written, and when a message last told the
        # aggregator so (facts, a heartbeat, or a SensorReport standing in for one).
        self._live: tuple[int, bytes] = (0, b"")
        self._live_at = time.monotonic()
        self._check_requests: asyncio.Queue = asyncio.Queue(maxsize=_MAX_PENDING_CHECK_REQUESTS)
        reader = asyncio.create_task(self._read(call))
        reporter = asyncio.create_task(self._report(call))
        checker = asyncio.create_task(self._run_checks(call))
        sensor = asyncio.create_task(self._report_sensors(call))
        stopped = asyncio.create_task(stop.wait())
        tasks = (reader, reporter, checker, sensor, stopped)
        try:
            done, _ = await asyncio.wait(
                {reader, reporter, stopped}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()  # re-raise what ended the session, if it failed

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            msg = await call.read()
            if msg is grpc.aio.EOF:
                raise ConnectionError("aggregator closed the stream")
            kind = msg.WhichOneof("message")
            if kind == "resync":
                log.info("resync requested", extra={"reason": msg.resync.reason})
                self._resync.set()
            elif kind == "run_checks":
                try:
                    self._check_requests.put_nowait(msg.run_checks)
                except asyncio.QueueFull:
                    log.warning("check requests full", extra={"request": msg.run_checks.request_id})
                    await self._refuse(call, msg.run_checks, "agent has too many check requests")

    async def _send(
        self,
        call: grpc.aio.StreamStreamCall,
        msg: agent_pb2.ConnectRequest,
        live: tuple[int, bytes] | None = None,
    ) -> None:
        """Write `msg`; `live`: the seq and digest it tells the aggregator the node's facts are
        at (a facts message or a heartbeat), noted once written."""
        async with self._write_lock:
            await self._write(call, msg)
            if live is not None:
                self._live, self._live_at = live, time.monotonic()

    async def _write(self, call: grpc.aio.StreamStreamCall, msg: agent_pb2.ConnectRequest) -> None:
        """Every message goes out here, under the write lock."""
        try:
            await call.write(msg)
        except asyncio.InvalidStateError as exc:
            # The aggregator ended the stream after our last read: a lost connection to
            # reconnect from, not a crash of the client's loop.
            raise ConnectionError(f"stream already ended: {exc}") from exc

    async def _send_sensors(self, call: grpc.aio.StreamStreamCall, gpus: list[GpuSensors]) -> None:
        """Write the readings `gpus`, only what moved since the stream's last report where
        the session says the aggregator takes that; standing in for a heartbeat when it says
        so, with the seq and digest read under the write lock, so they never lag a facts
        message written before them (the aggregator would refuse a seq going back)."""
        report = None
        if self._sensor_changes and self._sensors_sent is not None:
            report = changes_proto(gpus, self._sensors_sent)
        if report is None:
            report = sensors_proto(gpus)
        async with self._write_lock:
            if self._sensors_beat:
                report.seq, report.content_sha256 = self._live
            await self._write(call, agent_pb2.ConnectRequest(sensors=report))
            self._sensors_sent = gpus
            if self._sensors_beat:
                self._live_at = time.monotonic()

    async def _run_checks(self, call: grpc.aio.StreamStreamCall) -> None:
        """Run each RunChecks request's checks in order, answering each as it finishes."""
        while True:
            request = await self._check_requests.get()
            if self._checks is None:
                await self._refuse(call, request, "this agent runs no checks")
                continue
            specs = [(c.id, dict(c.parameters), c.timeout_s) for c in request.checks] or [
                (check_id, {}, None) for check_id in request.check_ids
            ]
            log.info("running checks", extra={"request": request.request_id, "n": len(specs)})
            ctx = self._checks.request_context()
            for check_id, params, timeout_s in specs:
                timed = await self._checks.run(check_id, params, timeout_s, ctx)
                out = timed.outcome
                result = agent_pb2.CheckResult(
                    request_id=request.request_id,
                    check_id=check_id,
                    status=out.status,
                    message=out.message,
                    unit=out.unit,
                    duration_s=timed.duration_s,
                    details=dict(out.details),
                )
                if out.value is not None:
                    result.value = out.value
                await self._send(call, agent_pb2.ConnectRequest(check_result=result))

    async def _refuse(
        self, call: grpc.aio.StreamStreamCall, request: agent_pb2.RunChecks, why: str
    ) -> None:
        ids = [c.id for c in request.checks] or list(request.check_ids)
        for check_id in ids:
            result = agent_pb2.CheckResult(
                request_id=request.request_id, check_id=check_id, status="error", message=why
            )
            await self._send(call, agent_pb2.ConnectRequest(check_result=result))

    async def _report(self, call: grpc.aio.StreamStreamCall) -> None:
        """Full facts first, unless the session resumed the last ones sent (seq 0, polled
        again at once); then per poll a delta, a resync's full facts, or a heartbeat when
        nothing told the aggregator the facts are as held for a heartbeat interval. The poll
        after the first facts sent (or the first poll) is `spread` over a poll interval.

        Runs until the session cancels it (the stream ended, or the agent is stopping).
        """
        poll_s = self._settings.poll_interval_s
        if self._resumed and self._sent is not None:
            seq, (facts, digest), wait_s = 0, self._sent, 0.0
            self._live = (seq, digest)
        else:
            seq = 1  # seq of the last facts message; heartbeats repeat it
            facts = await self._read_node(self._collect)
            digest = wire.content_digest(facts)
            await self._send(call, _full(seq, digest, facts), (seq, digest))
            self._sent = (facts, digest)
            wait_s = spread(poll_s)
        self._facts_sent.set()
        beat_s = self._heartbeat_s
        if self._sensors_beat and self._settings.sensor_interval_s <= self._heartbeat_s:
            # Reports come often enough: a heartbeat is the fallback for one that did not go
            # out (no readings, a failed read), and waits a poll more, so that a report due
            # at the same moment is not doubled by one.
            beat_s += self._settings.poll_interval_s
        while True:
            await woken(self._resync, timeout_s=wait_s)
            wait_s = poll_s if wait_s else spread(poll_s)  # 0: a resumed session's first poll
            current = await self._read_node(self._collect)
            if self._resync.is_set():
                self._resync.clear()
                seq += 1
                digest = wire.content_digest(current)
                await self._send(call, _full(seq, digest, current), (seq, digest))
                self._sent = (current, digest)
            elif current != facts:
                seq += 1
                changed, removed = wire.diff(facts, current)
                digest = wire.content_digest(current)
                await self._send(call, _delta(seq, digest, changed, removed), (seq, digest))
                self._sent = (current, digest)
            elif time.monotonic() - self._live_at >= beat_s:
                beat = agent_pb2.Heartbeat(seq=seq, content_sha256=digest)
                await self._send(call, agent_pb2.ConnectRequest(heartbeat=beat), (seq, digest))
            facts = current

    async def _report_sensors(self, call: grpc.aio.StreamStreamCall) -> None:
        """Once the full facts are out, the GPUs' latest readings at once and then every
        `sensor_interval_s`, the second report `spread` over the first interval; in a resumed
        session, the first report `stagger`ed over an interval, then every interval.

        Read only when one is due: the aggregator keeps the latest value alone, so a reading
        between reports would be thrown away unseen. A read that raises is skipped (heartbeats
        cover the gap) and the next interval reads again; the error is logged when it starts or
        changes, not every interval, and the first good read after it says so."""
        if self._sense is None:
            return
        await self._facts_sent.wait()
        every = self._settings.sensor_interval_s
        if self._resumed:
            # The aggregator restarted or the stream broke: the whole fleet resumes within
            # seconds, and readings sent at once would be its every report in those seconds.
            await asyncio.sleep(stagger(every))
            wait_s = every
        else:
            wait_s = spread(every)
        failing: str | None = None  # the error reads raise now
        while True:
            try:
                gpus = await self._read_node(self._sense)
            except Exception as exc:  # NVML lost mid-session: say so, keep the stream, try again
                if str(exc) != failing:
                    log.warning(
                        "sensor read failed", extra={"error": str(exc), "retry_s": round(wait_s, 1)}
                    )
                failing, gpus = str(exc), []
            else:
                if failing is not None:
                    log.info("sensor reads recovered", extra={"error_was": failing})
                failing = None
            if gpus:
                await self._send_sensors(call, gpus)
            await asyncio.sleep(wait_s)
            wait_s = every

    async def _read_node(self, read: Callable[[], T]) -> T:
        """`read()` on a worker thread (NVML may stall), never beside another read."""
        async with self._reading:
            return await asyncio.to_thread(read)


def spread(interval_s: float, rng: random.Random | None = None) -> float:
    """The gap between a session's first periodic send and its second, drawn uniformly from
    [interval/2, 3 interval/2): whenever agents were welcomed, their sends fall evenly over
    the interval from the second on, and the gap is an interval on average, so spreading
    sends no more messages than not."""
    return interval_s * (0.5 + (rng or random).random())


def stagger(interval_s: float, rng: random.Random | None = None) -> float:
    """A delay drawn uniformly from [0, interval_s): agents that start reporting together
    after it report as evenly as a fleet long connected."""
    return interval_s * (rng or random).random()


def reconnect_delay(
    settings: StreamSettings, failures: int, rng: random.Random | None = None
) -> float:
    """The delay before the next Hello, drawn uniformly from [0, window]: the window is
    `reconnect_window_s`, doubled per failed attempt in a row, capped at `backoff_max_s`."""
    window = min(settings.backoff_max_s, settings.reconnect_window_s * 2 ** min(failures, 30))
    return (rng or random).uniform(0, window)


def pushback_delay(retry_after_s: float, rng: random.Random | None = None) -> float:
    """The delay before the next Hello after the aggregator asked for `retry_after_s`: at
    least that, plus up to a second and a quarter of the hint, so agents given the same
    hint do not return together. Short on purpose: the aggregator already spreads refused
    agents by giving each a later hint than the last (aggregator/ingest/syncing.py), and
    doubling the hint would leave it idle while the tail waits."""
    return retry_after_s + (rng or random).uniform(0, 1.0 + retry_after_s / 4)


LOST_STATUS_NOTE = (
    "the stream ended while the agent was writing to it, and gRPC reports that as INTERNAL"
    " in place of the aggregator's status (grpc/grpc#36066): the agent reconnects"
)


def status_lost(exc: grpc.aio.AioRpcError) -> bool:
    """Whether `exc` is gRPC's INTERNAL for a write to a stream that had already ended: the
    client library then drops the status the aggregator sent (a refusal, a shutdown)."""
    return exc.code() == grpc.StatusCode.INTERNAL and "SendMessageOperation" in (
        exc.debug_error_string() or ""
    )


def _retry_after_s(exc: grpc.aio.AioRpcError) -> float | None:
    """The aggregator's retry hint on a RESOURCE_EXHAUSTED (busy) or an UNAVAILABLE (still
    starting), if it gave one."""
    if exc.code() not in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
        return None
    for key, value in exc.trailing_metadata() or ():
        if key == RETRY_AFTER_KEY:
            try:
                seconds = float(value)
            except ValueError:
                return None
            # Bounded: a wild hint must not silence the agent for hours.
            return min(max(seconds, 0.0), 300.0)
    return None


def _channel_options(settings: StreamSettings) -> list[tuple[str, int | str]]:
    """gRPC's connect retries while the aggregator is unreachable: at most `probe_max_s`
    apart, as a refused connection costs the aggregator nothing. The channel's connection
    is its own: gRPC otherwise hands a new channel the connection of a closed one to the
    same target while it lasts, the one a missing Welcome gave up on."""
    probe_ms = int(settings.probe_max_s * 1000)
    return [
        ("grpc.initial_reconnect_backoff_ms", min(1000, probe_ms)),
        ("grpc.max_reconnect_backoff_ms", probe_ms),
        ("grpc.use_local_subchannel_pool", 1),
    ]


async def _reachable(channel: grpc.aio.Channel, stop: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `channel` connects (TCP and HTTP/2, no call yet); False if `stop` is set or
    `timeout_s` passes first."""
    ready = asyncio.create_task(channel.channel_ready())
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({ready, stopped}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (ready, stopped):
            task.cancel()
    return ready.done() and not ready.cancelled() and ready.exception() is None


async def _stopped(stop: asyncio.Event, delay_s: float) -> bool:
    """Sleep `delay_s` unless `stop` is set first; whether it was."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=delay_s)
    except TimeoutError:
        return False
    return True


async def woken(event: asyncio.Event, timeout_s: float) -> None:
    """Return when `event` is set or `timeout_s` has passed: a timer and no task, as every
    poll waits so."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


def _full(seq: int, digest: bytes, facts: dict[str, wire.Reading]) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        full_facts=agent_pb2.FullFacts(seq=seq, content_sha256=digest, facts=wire.unflatten(facts))
    )


def _delta(
    seq: int, digest: bytes, changed: dict[str, wire.Reading], removed: list[str]
) -> agent_pb2.ConnectRequest:
    delta = agent_pb2.FactsDelta(seq=seq, content_sha256=digest, removed=removed)
    for path, reading in changed.items():
        delta.changed[path].CopyFrom(wire.to_fact(reading))
    return agent_pb2.ConnectRequest(delta=delta)
