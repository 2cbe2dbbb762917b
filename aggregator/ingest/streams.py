"""The open agent streams: one session per node, and the messages the aggregator sends on them.

The servicer opens and closes sessions; validation sends RunChecks through `send`. Two streams
for one node name: the newer one wins and the older is cancelled (the servicer ends it with
ABORTED). A restarted agent whose old TCP connection is still half-open must not be locked
out for an idle timeout; two agents fighting over one name show up as
`plumb_ingest_streams_superseded_total` climbing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from dataclasses import dataclass, field

from plumb.sensors import GpuSensors
from plumb.v1 import agent_pb2

log = logging.getLogger(__name__)

__all__ = ["Session", "Streams"]


@dataclass
class Session:
    """One open stream."""

    id: str
    node: str
    task: asyncio.Task | None
    outbound: asyncio.Queue
    boot_id: str | None = None
    agent_version: str | None = None
    seq: int = 0
    has_facts: bool = False
    # The readings of the stream's last SensorReport: what a changes-only one applies to.
    sensors: tuple[GpuSensors, ...] | None = None
    awaiting_full: bool = False
    # Why the aggregator cancelled this stream: "superseded" or "shutdown".
    ended_by: str | None = None
    # (writer ticket, seq) of acknowledged changes not yet known stored, oldest first, and
    # the highest seq known stored (Ack.durable_seq).
    unstored: deque[tuple[int, int]] = field(default_factory=deque)
    durable_seq: int = 0
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Streams:
    """Sessions by node name."""

    def __init__(self, outbound_queue_max: int):
        # Messages the aggregator starts (RunChecks), drained by each stream's writer task;
        # bounded: a full queue refuses the message rather than growing.
        self._outbound_max = outbound_queue_max
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, node: str) -> bool:
        return node in self._sessions

    def open(
        self, node: str, boot_id: str | None, agent_version: str | None
    ) -> tuple[Session, bool]:
        """Register a stream for `node` in the current task, and whether an older stream for
        the node was cancelled for it."""
        old = self._sessions.get(node)
        if old is not None:
            old.ended_by = "superseded"
            if old.task is not None:
                old.task.cancel()
            log.warning("stream superseded", extra={"node": node, "old_session": old.id})
        session = Session(
            id=uuid.uuid4().hex,
            node=node,
            task=asyncio.current_task(),
            outbound=asyncio.Queue(maxsize=self._outbound_max),
            boot_id=boot_id,
            agent_version=agent_version,
        )
        self._sessions[node] = session
        return session, old is not None

    def close(self, session: Session) -> None:
        """Forget `session` unless a newer stream for its node replaced it."""
        if self._sessions.get(session.node) is session:
            del self._sessions[session.node]

    def send(self, node: str, msg: agent_pb2.ConnectResponse) -> str | None:
        """Queue `msg` on the node's open stream; the session id, or None (no stream, full)."""
        session = self._sessions.get(node)
        if session is None:
            return None
        try:
            session.outbound.put_nowait(msg)
        except asyncio.QueueFull:
            log.warning("outbound queue full", extra={"node": node})
            return None
        return session.id

    def close_all(self) -> None:
        """End every stream now, so agents reconnect elsewhere at once."""
        for session in list(self._sessions.values()):
            session.ended_by = "shutdown"
            if session.task is not None:
                session.task.cancel()
