"""The batching writer: persists NodeUpdates off the ingest hot path.

One buffer, one task, one transaction per batch. An update stays in the buffer until it is
written, so neither a database outage nor cancelling the task loses it: a batch that fails
because the database is unavailable is retried with capped exponential backoff. A batch
the store refuses for its content is retried one update per transaction, so one bad update
cannot hold back the rest; the bad one is logged and counted in ``rejected``. When the
buffer is full ``submit`` says so, and the caller resyncs the node instead.

Drift transitions and baselines are never refused: a resync cannot bring them back (the
agent resends facts, not findings), and other replicas read findings from the database.
They only follow facts this queue accepted, so they overshoot ``queue_max`` by at most
what those facts produce; facts are refused while the buffer, transitions included, is full.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from itertools import islice

from .store import NodeUpdate, Store, StoreError

__all__ = ["Writer"]

log = logging.getLogger(__name__)


class Writer:
    """Batches NodeUpdates off the ingest hot path: one queue, one task, one transaction per batch.

    ``run`` is the task (its owner cancels it, after ``flush`` for a clean stop). Counters:
    ``dropped`` (refused by a full queue), ``rejected`` (refused by the store),
    ``written_changes``, ``batches``; ``healthy`` is False while the store is failing.
    """

    def __init__(
        self,
        store: Store,
        *,
        queue_max: int = 10_000,
        batch_max: int = 500,
        linger_s: float = 0.05,
        backoff_min_s: float = 0.1,
        backoff_max_s: float = 5.0,
    ) -> None:
        if queue_max < 1 or batch_max < 1:
            raise ValueError("queue_max and batch_max must be at least 1")
        self._store = store
        self._queue_max = queue_max
        self._batch_max = batch_max
        self._linger_s = linger_s
        self._backoff_min_s = backoff_min_s
        self._backoff_max_s = backoff_max_s
        self._buffer: deque[NodeUpdate] = deque()
        self._arrived = asyncio.Event()  # the buffer is not empty
        self._filled = asyncio.Event()  # the buffer holds a full batch
        self._progress = asyncio.Event()  # replaced each time updates are done
        self._isolate = 0  # how many of the oldest updates to write one per transaction
        self._submitted = 0
        self._done = 0
        self._running = False
        self.dropped = 0
        self.rejected = 0
        self.written_changes = 0
        self.batches = 0
        self.healthy = True

    def room_for(self, node: str) -> bool:
        """Whether ``submit`` would take an update of ``node`` carrying facts now; one it
        would not is counted in ``dropped``, as ``submit`` counts it."""
        if len(self._buffer) < self._queue_max:
            return True
        self.dropped += 1
        log.debug("write queue full", extra={"node": node})
        return False

    @property
    def submitted(self) -> int:
        """How many updates were ever queued: the last one's ticket (tickets count from 1)."""
        return self._submitted

    @property
    def done(self) -> int:
        """How many of the queued updates are written, in queue order: the update with ticket
        ``t`` is in the database once ``done >= t`` (or was refused by it and logged)."""
        return self._done

    @property
    def pending(self) -> int:
        """Updates accepted but not yet written, the batch in flight included."""
        return len(self._buffer)

    def submit(self, update: NodeUpdate) -> bool:
        """Queues ``update``; False when the queue is full (counted in ``dropped``).

        An update carrying only drift transitions or a baseline is always queued.
        """
        if not _decided(update) and not self.room_for(update.node):
            return False
        self._buffer.append(update)
        self._submitted += 1
        self._arrived.set()
        if len(self._buffer) >= self._batch_max:
            self._filled.set()
        return True

    async def run(self) -> None:
        """Writes batches until cancelled; the store being down delays writes, never loses them."""
        if self._running:
            raise RuntimeError("Writer.run is already running")
        self._running = True
        try:
            await self._loop()
        finally:
            self._running = False

    async def flush(self, timeout_s: float = 10.0) -> None:
        """Waits until every update submitted so far is written or rejected.

        Raises TimeoutError after ``timeout_s`` (the store is down, or ``run`` is not running).
        """
        target = self._submitted
        async with asyncio.timeout(timeout_s):
            while self._done < target:
                await self._progress.wait()

    async def _loop(self) -> None:
        delay_s = self._backoff_min_s
        retrying = False
        while True:
            await self._gather(linger=not retrying)
            batch = list(islice(self._buffer, 1 if self._isolate else self._batch_max))
            try:
                await self._apply(batch)
            except Exception as exc:  # the task boundary: a bug in one batch must not stop all
                if isinstance(exc, StoreError) and exc.retryable:
                    self.healthy = False
                    log.warning(
                        "store write failed, will retry",
                        extra={"updates": len(batch), "retry_in_s": delay_s, "error": str(exc)},
                    )
                    await asyncio.sleep(delay_s)
                    delay_s = min(delay_s * 2, self._backoff_max_s)
                    retrying = True
                else:
                    self._reject(batch, exc)
                continue
            delay_s = self._backoff_min_s
            retrying = False

    async def _gather(self, *, linger: bool) -> None:
        """Waits for an update, then (if ``linger``) at most ``linger_s`` for a full batch."""
        while not self._buffer:
            self._arrived.clear()
            await self._arrived.wait()
        if linger and len(self._buffer) < self._batch_max and not self._isolate:
            self._filled.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._linger_s):
                    await self._filled.wait()

    async def _apply(self, batch: list[NodeUpdate]) -> None:
        call = asyncio.ensure_future(asyncio.to_thread(self._store.apply, batch))
        try:
            written = await asyncio.shield(call)
        except asyncio.CancelledError:
            # The transaction goes on in its thread regardless; wait for its outcome so the
            # buffer keeps exactly what is not yet written.
            await asyncio.wait([call])
            if not call.cancelled() and call.exception() is None:
                self._written(batch, call.result())
            raise
        self._written(batch, written)

    def _written(self, batch: list[NodeUpdate], written: int) -> None:
        self.written_changes += written
        self.batches += 1
        if not self.healthy:
            log.info("store writes recovered")
            self.healthy = True
        self._finish(len(batch))

    def _reject(self, batch: list[NodeUpdate], exc: Exception) -> None:
        if len(batch) > 1:
            log.warning(
                "batch refused, writing its updates one at a time", extra={"updates": len(batch)}
            )
            self._isolate = len(batch)
            return
        self.rejected += 1
        log.error(
            "update refused by the store, dropped",
            extra={"node": batch[0].node, "error": str(exc)},
            exc_info=not isinstance(exc, StoreError),
        )
        self._finish(1)

    def _finish(self, count: int) -> None:
        for _ in range(count):
            self._buffer.popleft()
        self._done += count
        self._isolate = max(0, self._isolate - count)
        self._progress.set()
        self._progress = asyncio.Event()


def _decided(update: NodeUpdate) -> bool:
    """Whether ``update`` holds only what the aggregator decided (drift, baseline, a node's
    removal), no facts."""
    return bool(update.opened or update.closed or update.baseline or update.removed) and not (
        update.facts is not None
        or update.connected is not None
        or update.last_report_at is not None
        or update.boot_id is not None
        or update.agent_version is not None
    )
