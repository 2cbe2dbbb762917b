"""How many agent streams may sync at once, how the rest wait their turn, and when a refused
agent should come back.

A stream syncs from its Hello until its first facts are applied (parsing, hashing and
evaluating ~300 facts: the costly part of a connect). In a cold start or a reconnect storm,
Hellos beyond what the loop keeps up with would each wait on a saturated loop until the
agent gave up on its Welcome and came back, costing both sides a new connection.

`Syncing` admits as many streams as finish in `target_s` at the rate streams finished
lately (Little's law: with that many in flight, a stream admitted now syncs in about
`target_s`), never fewer than `floor` (also the cap before any rate is known) nor more than
`ceiling`: a fast aggregator is not throttled by a fixed number, a saturated one does not
take on more than it syncs in `target_s`.

Past the cap a stream waits in line, first come first served, up to `max_waiting` of them:
it is welcomed at once, and its FullFacts stays unread in the transport until its turn
(the agent waits for its Ack without a deadline). Refusing them instead made a
10,000-agent cold start at 1,000 a second cost 12,000 refusals, each a failed attempt on the
agent's side and a new connection and Hello on both (bench/README.md, round 35); a waiting
stream costs an idle coroutine and its unread FullFacts (~15 KB for an 8-GPU node).

Past the line a Hello is refused at once (RESOURCE_EXHAUSTED) with a hint that places the
agent behind those waiting, in a line served at the sync rate: the first refused comes back
in about one sync's time after the last waiting one, the thousandth after a thousand more,
so the tail neither waits out one long hint nor returns all together. The line never moves
slower than `floor` streams per `target_s`: while refused agents wait out their hints the
measured rate is the line's own pace, and lining up at it left a 4,000-agent cold start
under 60 % busy for 41 of its 77 s (bench/fleet.py); an agent back too early is refused
again, which costs far less than an idle aggregator.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from plumb.aggregator.errors import RateLimited

__all__ = ["Busy", "Syncing"]

# Rates older than this say nothing of the loop now: an hour-old sync rate must not size a storm.
RATE_WINDOW_S = 10.0
# A rate is measured over at least this long: two syncs a millisecond apart are no evidence
# of a thousand a second, and would open the cap to a flood.
MIN_RATE_SPAN_S = 1.0
# The longest hint: an agent refused is never told to stay away longer than this.
MAX_HINT_S = 30


class Busy(RateLimited):
    """Too many streams syncing and waiting their turn; counted as `busy`, not as a client's
    fault."""


class Syncing:
    """Streams between Hello and their first applied facts: at most `limit()` syncing at
    once, at most `max_waiting` more waiting in line for their turn."""

    def __init__(
        self,
        floor: int,
        ceiling: int,
        target_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_waiting: int = 0,
    ):
        self._floor, self._ceiling, self._target_s = floor, max(floor, ceiling), target_s
        self._clock = clock
        self._max_waiting = max_waiting
        self._open: set[object] = set()
        # Slots waiting for their turn, in arrival order, each with the future its stream
        # awaits in `granted` (None until it awaits).
        self._line: OrderedDict[object, asyncio.Future | None] = OrderedDict()
        self._finished: deque[float] = deque(maxlen=self._ceiling)  # when recent syncs ended
        # When the agents refused so far will each have had their turn, at the sync rate.
        self._line_until = clock()

    def __len__(self) -> int:
        return len(self._open)

    @property
    def waiting(self) -> int:
        """How many streams wait in line for a slot."""
        return len(self._line)

    def limit(self) -> int:
        """How many streams may sync at once now."""
        per_s = self._rate()
        if per_s is None:
            return self._floor
        return max(self._floor, min(self._ceiling, math.ceil(per_s * self._target_s)))

    def admit(self) -> object:
        """A slot for one stream, to await with `granted` and hand back to `done`: free now,
        or in line behind those waiting; Busy, with a retry hint, when the line is full."""
        self._grant()
        slot = object()
        if len(self._open) < self.limit() and not self._line:
            self._open.add(slot)
            return slot
        if len(self._line) >= self._max_waiting:
            retry_s = self._place_in_line()
            raise Busy(
                f"{len(self._open)} agents are syncing their facts and {len(self._line)} wait "
                f"their turn, the most this aggregator takes at once now (as many as sync in "
                f"ingest.sync_target_s, within ingest.min_syncing_streams and "
                f"ingest.max_syncing_streams, and ingest.max_waiting_streams more); "
                f"retry in {retry_s} s",
                retry_after_s=retry_s,
                hint="the agent retries on its own after that; if this lasts, the aggregator "
                "lacks CPU for the fleet's reconnects",
            )
        self._line[slot] = None
        return slot

    async def granted(self, slot: object) -> None:
        """Returns once `slot` may sync: at once for a free one, else on its turn."""
        if slot not in self._line:
            return
        waiter = self._line[slot] = asyncio.get_running_loop().create_future()
        await waiter

    def done(self, slot: object) -> None:
        """The stream holding `slot` synced or ended (in line or not); the next in line gets
        its turn. A no-op the second time."""
        if slot in self._open:
            self._open.discard(slot)
            self._finished.append(self._clock())
        elif slot in self._line:
            waiter = self._line.pop(slot)
            if waiter is not None:
                waiter.cancel()
        self._grant()

    def _grant(self) -> None:
        """Give free slots to the first in line."""
        limit = self.limit()
        while self._line and len(self._open) < limit:
            slot, waiter = self._line.popitem(last=False)
            if waiter is not None and waiter.cancelled():
                continue  # its stream ended while waiting: `done` will find nothing
            self._open.add(slot)
            if waiter is not None:
                waiter.set_result(None)

    def _rate(self) -> float | None:
        """Syncs finished per second over the last RATE_WINDOW_S; None with fewer than two."""
        now = self._clock()
        while self._finished and now - self._finished[0] > RATE_WINDOW_S:
            self._finished.popleft()
        if len(self._finished) < 2 or now <= self._finished[0]:
            return None
        return len(self._finished) / max(now - self._finished[0], MIN_RATE_SPAN_S)

    def _place_in_line(self) -> int:
        """Seconds until this refused agent's turn: one sync's time after the turn of the
        agent refused before it, or after those waiting in line (if that turn has passed)."""
        now = self._clock()
        # Never slower than the floor's worth of streams in target_s: a rate measured while
        # refused agents wait out their hints is the line's own pace, not the aggregator's.
        per_s = max(self._rate() or 0.0, self._floor / self._target_s)
        after_line = now + len(self._line) / per_s
        self._line_until = min(max(self._line_until, after_line) + 1 / per_s, now + MAX_HINT_S)
        return max(1, math.ceil(self._line_until - now))
