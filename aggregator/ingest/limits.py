"""What the aggregator refuses on an agent's stream, checked before anything is applied.

The wire contract (plumb/facts.py) bounds paths, strings and repeated fields for both ends;
this module adds the deployment's policy from IngestSettings (GPUs per node and their
indexes, fields per delta, Hello's size and characters) and the stream's ordering rule: seq
never goes backwards. Each refusal is a `Refused` with a `reason` for
`plumb_ingest_streams_closed_by_aggregator_total`; ingest aborts the stream with
INVALID_ARGUMENT and stores nothing of the message. `NewNodeNames` caps how fast names never
seen before may appear (one Hello per stream already caps names per stream): over it, a
RateLimited that ingest answers with RESOURCE_EXHAUSTED, counted as `new_node_rate`.
`syncing.Syncing` caps how many streams may be between Hello and their first facts at once
(a cold start or a storm): over it, a RateLimited answered the same way, counted as `busy`.
Both carry a retry hint (`RETRY_AFTER_KEY` in the trailing metadata) the agent waits out.

A FactStatus this aggregator does not know (proto3 enums are open) is refused too, naming the
field: reading it as "not collected" would silently drop a fact a newer agent meant to send.
Upgrade aggregators before agents.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from plumb import facts as wire
from plumb import sensors
from plumb.aggregator.errors import InvalidInput, RateLimited
from plumb.aggregator.settings import IngestSettings
from plumb.v1 import agent_pb2, facts_pb2

__all__ = [
    "RETRY_AFTER_KEY",
    "NewNodeNames",
    "Refused",
    "check_delta",
    "check_full",
    "check_heartbeat",
    "check_hello",
    "check_sensors",
    "malformed",
    "undecodable",
]

# Trailing metadata of a RESOURCE_EXHAUSTED: whole seconds to wait before the next Hello
# (the agent reads it in agent/stream.py; the wire contract between the two).
RETRY_AFTER_KEY = "plumb-retry-after-s"

# A Kubernetes node name: an RFC 1123 subdomain.
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MAX_NODE_NAME = 253
# agent_version, boot_id and each capability: a version string, a UUID, a feature name.
_MAX_IDENT = 128
_GPU_INDEX = re.compile(r"gpus\[(\d+)\]")
# C0 and C1 control characters, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class Refused(InvalidInput):
    """A message the stream's rules refuse; `reason` labels the refusal counter."""

    def __init__(self, reason: str, message: str, *, hint: str):
        super().__init__(f"{message}; {hint}", hint=hint)
        self.reason = reason


def malformed(kind: str, exc: wire.FactsError) -> Refused:
    """The refusal for a facts message the wire contract rejects."""
    return Refused(
        exc.reason, f"malformed {kind}: {exc}", hint="fix the agent; nothing of it was stored"
    )


def digest(kind: str, raw: bytes) -> str:
    """A message's content_sha256 as the hex hash the aggregator keeps; Refused if malformed."""
    try:
        return wire.hex_digest(raw)
    except wire.FactsError as exc:
        raise malformed(kind, exc) from exc


def undecodable(exc: Exception) -> Refused:
    """The refusal for bytes that do not parse as a ConnectRequest."""
    return Refused(
        "undecodable",
        f"the message is not a plumb.v1.ConnectRequest ({exc})",
        hint="check that agent and aggregator speak the same plumb.v1 protocol",
    )


def check_hello(msg: agent_pb2.ConnectRequest, settings: IngestSettings) -> str:
    """The node name of a well-formed Hello; Refused otherwise."""
    if msg.WhichOneof("message") != "hello":
        raise Refused(
            "no_hello",
            "the first message on a stream must be Hello",
            hint="send Hello before any facts",
        )
    hello = msg.hello
    name = hello.node_name
    if len(name) > _MAX_NODE_NAME or not _NODE_NAME.fullmatch(name):
        raise Refused(
            "invalid_node_name",
            f"node name {name[:64]!r} is not a valid Kubernetes node name",
            hint="use the node's name as `kubectl get nodes` shows it (--node-name)",
        )
    idents = [hello.agent_version, hello.boot_id, *hello.capabilities]
    if any(len(s) > _MAX_IDENT for s in idents):
        raise Refused(
            "string_too_long",
            f"Hello agent_version, boot_id and capabilities are limited to {_MAX_IDENT} "
            "characters each",
            hint="fix the agent",
        )
    # Identities are logged and stored: a newline would forge a log line, a NUL is refused by
    # the database's text columns, an ANSI escape rewrites the terminal that reads them.
    if any(_CONTROL.search(s) for s in idents):
        raise Refused(
            "malformed_hello",
            "Hello agent_version, boot_id or a capability contains a control character",
            hint="fix the agent",
        )
    if len(hello.capabilities) > settings.max_capabilities:
        raise Refused(
            "too_many_fields",
            f"Hello lists {len(hello.capabilities)} capabilities, more than the "
            f"{settings.max_capabilities} allowed (ingest.max_capabilities)",
            hint="fix the agent",
        )
    return name


def check_full(full: agent_pb2.FullFacts, held_seq: int | None, settings: IngestSettings) -> None:
    """Refuse FullFacts with too many GPUs, a negative GPU index, or a seq at or below
    `held_seq` (this stream's)."""
    _check_seq("FullFacts", full.seq, held_seq)
    _check_gpus(len(full.facts.gpus), settings)
    for i, gpu in enumerate(full.facts.gpus):
        if gpu.index.status == facts_pb2.FACT_STATUS_OK:
            _check_gpu_index(f"gpus[{i}].index", gpu.index.value)


def check_delta(delta: agent_pb2.FactsDelta, held_seq: int, settings: IngestSettings) -> None:
    """Refuse a FactsDelta that is too large, names a GPU past the limit, or goes back in seq.

    Runs before the delta's facts are parsed, so an oversized delta costs no parsing.
    """
    _check_seq("FactsDelta", delta.seq, held_seq)
    fields = len(delta.changed) + len(delta.removed)
    if fields > settings.max_delta_fields:
        raise Refused(
            "too_many_fields",
            f"FactsDelta touches {fields} fields, more than the {settings.max_delta_fields} "
            "allowed (ingest.max_delta_fields)",
            hint="send FullFacts instead of a delta this large",
        )
    for path, fact in delta.changed.items():
        match = _GPU_INDEX.match(path)
        if match is not None:
            _check_gpus(int(match.group(1)) + 1, settings)
            if path[match.end() :] == ".index" and fact.WhichOneof("value") == "int_value":
                _check_gpu_index(path, fact.int_value)


def check_heartbeat(beat: agent_pb2.Heartbeat, held_seq: int) -> None:
    """Refuse a Heartbeat whose seq is below that of the facts already applied."""
    if beat.seq < held_seq:
        raise _backwards("Heartbeat", beat.seq, held_seq, "at least")


def check_sensors(
    report: facts_pb2.SensorReport,
    held_seq: int,
    settings: IngestSettings,
    held: tuple[sensors.GpuSensors, ...] | None,
) -> tuple[sensors.GpuSensors, ...]:
    """The readings of a SensorReport, a changes-only one applied to `held` (the stream's
    last readings); Refused, naming the field, for more GPUs than a node may report, a GPU
    index past that bound, a GPU twice, a value no GPU reports, or changes with nothing
    held; and, when it stands in for a heartbeat (carries content_sha256), as a Heartbeat
    for its seq."""
    if report.content_sha256 and report.seq < held_seq:
        raise _backwards("SensorReport", report.seq, held_seq, "at least")
    _check_gpus(len(report.gpus), settings)
    for i, gpu in enumerate(report.gpus):
        if gpu.index >= settings.max_gpus_per_node:
            raise Refused(
                "too_many_gpus",
                f"SensorReport gpus[{i}].index is {gpu.index}, beyond the "
                f"{settings.max_gpus_per_node} GPUs a node may report (ingest.max_gpus_per_node)",
                hint="fix the agent; nothing of it was stored",
            )
    try:
        if not report.changes_only:
            return sensors.from_proto(report)
        if held is None:
            raise sensors.SensorsError(
                "changes_only: this stream sent no whole report to apply the changes to"
            )
        return sensors.apply_changes(held, report)
    except sensors.SensorsError as exc:
        raise Refused(
            "malformed_sensors",
            f"malformed SensorReport: {exc}",
            hint="fix the agent; nothing of it was stored",
        ) from exc


def _check_seq(kind: str, seq: int, held_seq: int | None) -> None:
    if held_seq is not None and seq <= held_seq:
        raise _backwards(kind, seq, held_seq, "above")


def _backwards(kind: str, seq: int, held_seq: int, bound: str) -> Refused:
    return Refused(
        "seq_backwards",
        f"{kind} seq {seq} goes backwards: this stream is at seq {held_seq}, "
        f"so the next must be {bound} it",
        hint="number every facts message on a stream one above the last",
    )


def _check_gpus(count: int, settings: IngestSettings) -> None:
    if count > settings.max_gpus_per_node:
        raise Refused(
            "too_many_gpus",
            f"{count} GPUs is more than the {settings.max_gpus_per_node} a node may report "
            "(ingest.max_gpus_per_node)",
            hint="raise PLUMB_INGEST__MAX_GPUS_PER_NODE if the node really has them",
        )


def _check_gpu_index(path: str, index: int) -> None:
    # NVML numbers GPUs from 0; a negative one would sort, label and match as no real GPU does.
    if index < 0:
        raise Refused(
            "negative_gpu_index",
            f"{path} is {index}: a GPU index is never negative",
            hint="fix the agent; nothing of it was stored",
        )


class NewNodeNames:
    """A token bucket of node names this aggregator has never held: `per_minute` refill each
    minute, and up to as many may come at once (a fleet's first start).

    A name is charged once a minute however often it asks: a new node refused for another
    reason (the sync line is full in a cold start) retries under the same name, and each retry
    charged would refuse a fleet smaller than the budget as if it invented names."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self._per_minute = per_minute
        self._per_s = per_minute / 60
        self._tokens = float(per_minute)
        self._clock = clock
        self._at = clock()
        # Names charged in the last minute, oldest first, with when: at most two minutes'
        # budget (a full bucket, then its refill).
        self._charged: dict[str, float] = {}

    def admit(self, name: str) -> None:
        """Take one token for the new name `name` unless it took one within the last minute;
        RateLimited when none is left."""
        now = self._clock()
        while self._charged:
            oldest, at = next(iter(self._charged.items()))
            if at > now - 60:
                break
            del self._charged[oldest]
        if name in self._charged:
            return
        self._tokens = min(self._per_minute, self._tokens + (now - self._at) * self._per_s)
        self._at = now
        if self._tokens < 1:
            retry_s = math.ceil((1 - self._tokens) / self._per_s)
            raise RateLimited(
                f"node {name!r} is new, and more than {self._per_minute} new node names a minute "
                f"arrived (ingest.max_new_nodes_per_minute); retry in {retry_s} s",
                retry_after_s=retry_s,
                hint="raise PLUMB_INGEST__MAX_NEW_NODES_PER_MINUTE if the fleet really grows "
                "this fast; otherwise find the client inventing node names",
            )
        self._tokens -= 1
        self._charged[name] = now
