"""Retention: what is older than store.retention_days leaves the database, on a schedule."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from plumb.aggregator.settings import StoreSettings

from .store import Store, StoreError

log = logging.getLogger(__name__)


class Retention:
    """Prunes the store every ``retention_check_s`` while ``is_leader()``; counts the rows."""

    def __init__(self, store: Store, settings: StoreSettings, is_leader: Callable[[], bool]):
        self._store = store
        days = settings.retention_days
        self._age = None if days is None else timedelta(days=days)
        self._every_s = settings.retention_check_s
        self._is_leader = is_leader
        # Rows deleted per table since start, for plumb_store_pruned_rows_total.
        self.pruned: Counter[str] = Counter()

    async def run(self, ready: asyncio.Event) -> None:
        """Once ``ready`` (the stored nodes restored), prune now and then on schedule, until
        cancelled. A failed pass is logged and retried at the next one."""
        if self._age is None:
            return
        await ready.wait()
        while True:
            if self._is_leader():
                try:
                    await self.prune(datetime.now(UTC))
                except StoreError as exc:
                    log.warning("pruning old history failed; retrying later: %s", exc)
            await asyncio.sleep(self._every_s)

    async def prune(self, now: datetime) -> dict[str, int]:
        """One pass: delete what is older than the retention age at ``now`` (nothing when
        retention is off)."""
        if self._age is None:
            return {}
        before = now - self._age
        deleted = await asyncio.to_thread(self._store.prune, before)
        self.pruned.update(deleted)
        if any(deleted.values()):
            log.info("old history pruned", extra={"before": before.isoformat(), **deleted})
        return deleted
