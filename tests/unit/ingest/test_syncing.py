"""The cap on streams syncing at once (ingest/syncing.py): slots, a cap that follows the
measured sync rate, a line of streams waiting their turn, and retry hints that line refused
agents up at that rate behind it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from pydantic import ValidationError

from plumb.aggregator.errors import RateLimited
from plumb.aggregator.ingest.syncing import MAX_HINT_S, RATE_WINDOW_S, Busy, Syncing
from plumb.aggregator.settings import IngestSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _finish(syncing: Syncing, clock: Clock, n: int, every_s: float) -> None:
    """`n` streams sync one after another, `every_s` apart; the clock ends at the last."""
    for i in range(n):
        if i:
            clock.now += every_s
        syncing.done(syncing.admit())


def _hints(syncing: Syncing, n: int) -> list[int]:
    out = []
    for _ in range(n):
        with pytest.raises(Busy) as refused:
            syncing.admit()
        out.append(refused.value.retry_after_s)
    return out


def test_a_slot_past_the_limit_is_refused_as_busy_and_a_freed_one_admits_again():
    syncing = Syncing(2, 2, 2.0, Clock())
    first, _ = syncing.admit(), syncing.admit()
    with pytest.raises(Busy) as refused:
        syncing.admit()
    assert isinstance(refused.value, RateLimited)  # answered RESOURCE_EXHAUSTED
    syncing.done(first)
    syncing.done(first)  # a second done frees nothing more
    assert len(syncing) == 1
    syncing.admit()
    assert len(syncing) == 2


async def test_past_the_cap_a_stream_waits_its_turn_first_come_first_served():
    syncing = Syncing(1, 1, 2.0, Clock(), max_waiting=2)
    holder = syncing.admit()
    first, second = syncing.admit(), syncing.admit()
    assert (len(syncing), syncing.waiting) == (1, 2)
    with pytest.raises(Busy, match="2 wait their turn"):
        syncing.admit()  # the line is full
    turns = [asyncio.create_task(syncing.granted(s)) for s in (first, second)]
    await asyncio.sleep(0)
    assert not any(t.done() for t in turns)

    syncing.done(holder)

    await asyncio.wait_for(turns[0], 1)
    assert not turns[1].done()
    assert (len(syncing), syncing.waiting) == (1, 1)
    syncing.done(first)
    await asyncio.wait_for(turns[1], 1)


async def test_a_free_slot_is_granted_at_once():
    syncing = Syncing(1, 1, 2.0, Clock(), max_waiting=2)
    await asyncio.wait_for(syncing.granted(syncing.admit()), 1)
    assert (len(syncing), syncing.waiting) == (1, 0)


async def test_a_stream_that_ends_while_waiting_gives_its_turn_to_the_next():
    syncing = Syncing(1, 1, 2.0, Clock(), max_waiting=2)
    holder, gone, after = syncing.admit(), syncing.admit(), syncing.admit()
    waiting = asyncio.create_task(syncing.granted(gone))
    await asyncio.sleep(0)
    waiting.cancel()  # its stream ended (the servicer then calls done, maybe later)
    with contextlib.suppress(asyncio.CancelledError):
        await waiting

    syncing.done(holder)

    await asyncio.wait_for(syncing.granted(after), 1)
    syncing.done(gone)  # nothing more to free
    assert (len(syncing), syncing.waiting) == (1, 0)


def test_a_refused_agent_is_placed_behind_those_waiting():
    clock = Clock()
    syncing = Syncing(2, 2, 2.0, clock, max_waiting=4)
    _finish(syncing, clock, 2, 1.0)  # 2 in 1 s: one turn every 0.5 s
    for _ in range(2 + 4):
        syncing.admit()  # 2 syncing, 4 waiting: their turns take the next 2 s
    # The first refused has its turn at +2.5 s, the next at +3 s, rounded up.
    assert _hints(syncing, 2) == [3, 3]


def test_the_cap_is_what_syncs_in_the_target_time_at_the_measured_rate():
    clock = Clock()
    syncing = Syncing(2, 100, 2.0, clock)
    assert syncing.limit() == 2  # no rate yet: the floor
    _finish(syncing, clock, 11, 0.1)  # 11 finished over 1 s: 11 a second
    assert syncing.limit() == 22  # 11/s for 2 s
    for _ in range(22):
        syncing.admit()
    with pytest.raises(Busy):
        syncing.admit()


def test_the_cap_stays_within_its_floor_and_ceiling():
    clock = Clock()
    fast = Syncing(2, 15, 2.0, clock)
    _finish(fast, clock, 11, 0.1)
    assert fast.limit() == 15
    clock = Clock()
    slow = Syncing(8, 100, 2.0, clock)
    _finish(slow, clock, 3, 1.0)  # 3 in 2 s: 1.5 a second, 3 in the target time
    assert slow.limit() == 8


def test_refused_agents_are_lined_up_at_the_sync_rate():
    clock = Clock()
    syncing = Syncing(2, 2, 2.0, clock)
    _finish(syncing, clock, 2, 1.0)  # 2 in 1 s: one turn every 0.5 s
    syncing.admit(), syncing.admit()
    # Turns at +0.5, +1.0, +1.5, +2.0, +2.5 s, each rounded up to whole seconds.
    assert _hints(syncing, 5) == [1, 1, 2, 2, 3]


def test_a_line_that_has_passed_starts_again_from_now():
    clock = Clock()
    syncing = Syncing(2, 2, 2.0, clock)
    _finish(syncing, clock, 2, 1.0)
    syncing.admit(), syncing.admit()
    assert _hints(syncing, 4) == [1, 1, 2, 2]
    clock.now += 3.0  # the line's last turn (+2 s) has passed: turns again from now
    # 2 syncs in 4 s is 0.5 a second, below the floor's pace (2 in 2 s): a turn a second.
    assert _hints(syncing, 2) == [1, 2]


def test_a_rate_slowed_by_agents_waiting_out_hints_does_not_spread_the_line_wider():
    clock = Clock()
    syncing = Syncing(8, 100, 2.0, clock)
    _finish(syncing, clock, 3, 1.0)  # 3 in 2 s: 1.5 a second, as while the line waits
    for _ in range(8):
        syncing.admit()
    # At the floor's pace, 8 in 2 s: turns at +0.25, +0.5, +0.75, +1 s (not 1.5 a second's
    # +0.7, +1.3, +2, +2.7 s, which would leave the aggregator idle while the line waits).
    assert _hints(syncing, 4) == [1, 1, 1, 1]


def test_no_hint_is_longer_than_the_cap_and_the_line_stops_growing_there():
    clock = Clock()
    syncing = Syncing(2, 2, 2.0, clock)
    _finish(syncing, clock, 2, 1.0)
    syncing.admit(), syncing.admit()
    hints = _hints(syncing, 100)  # 2 turns a second: 60 fill the 30 s
    assert max(hints) == MAX_HINT_S
    assert hints[59:] == [MAX_HINT_S] * 41


def test_before_any_rate_the_floor_is_taken_to_sync_in_the_target_time():
    syncing = Syncing(4, 4, 2.0, Clock())
    for _ in range(4):
        syncing.admit()
    # 4 in 2 s: a turn every 0.5 s.
    assert _hints(syncing, 3) == [1, 1, 2]


def test_syncs_older_than_the_rate_window_do_not_size_a_storm():
    clock = Clock()
    syncing = Syncing(2, 100, 2.0, clock)
    _finish(syncing, clock, 11, 0.1)
    clock.now += RATE_WINDOW_S + 3600  # an hour of a quiet fleet, then a storm
    assert syncing.limit() == 2
    syncing.admit(), syncing.admit()
    assert _hints(syncing, 1) == [1]  # 2 in 2 s assumed: the first turn in 0.5 s


def test_settings_refuse_a_floor_above_the_ceiling():
    with pytest.raises(ValidationError, match="min_syncing_streams must not exceed"):
        IngestSettings(min_syncing_streams=10, max_syncing_streams=5)


def test_a_burst_of_syncs_counts_as_spread_over_a_second_at_least():
    clock = Clock()
    syncing = Syncing(2, 1000, 2.0, clock)
    _finish(syncing, clock, 10, 0.001)  # 10 in 9 ms: taken as 10 a second, not 1,100
    assert syncing.limit() == 20
