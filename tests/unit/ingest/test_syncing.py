"""The cap on streams syncing at once (limits.Syncing): slots, refusals and the retry hint."""

from __future__ import annotations

import pytest

from plumb.aggregator.errors import RateLimited
from plumb.aggregator.ingest.limits import Busy, Syncing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_slot_past_the_limit_is_refused_as_busy_and_a_freed_one_admits_again():
    syncing = Syncing(2, Clock())
    first, _ = syncing.admit(), syncing.admit()
    with pytest.raises(Busy) as refused:
        syncing.admit()
    assert isinstance(refused.value, RateLimited)  # answered RESOURCE_EXHAUSTED
    syncing.done(first)
    syncing.done(first)  # a second done frees nothing more
    assert len(syncing) == 1
    syncing.admit()
    assert len(syncing) == 2


def test_the_hint_is_the_time_the_syncing_streams_take_at_the_recent_rate():
    clock = Clock()
    syncing = Syncing(10, clock)
    slots = [syncing.admit() for _ in range(10)]
    for slot in slots[:5]:  # 5 finish, one every 0.5 s
        syncing.done(slot)
        clock.now += 0.5
    slots += [syncing.admit() for _ in range(5)]
    with pytest.raises(Busy) as refused:
        syncing.admit()
    # 5 finished in the 2.5 s since the first of them, 2 a second: 10 syncing take 5 s.
    assert refused.value.retry_after_s == 5


def test_finishes_older_than_the_rate_window_do_not_stretch_the_hint():
    clock = Clock()
    syncing = Syncing(2, clock)
    for _ in range(2):
        syncing.done(syncing.admit())
    clock.now += Syncing.RATE_WINDOW_S + 3600  # an hour of a quiet fleet, then a storm
    syncing.admit(), syncing.admit()
    with pytest.raises(Busy) as refused:
        syncing.admit()
    assert refused.value.retry_after_s == 1


def test_the_hint_is_capped_at_30_s():
    clock = Clock()
    syncing = Syncing(1000, clock)
    first = [syncing.admit() for _ in range(2)]
    syncing.done(first[0])
    clock.now += 5.0
    syncing.done(first[1])  # 2 in 5 s: 0.4 a second
    for _ in range(1000):
        syncing.admit()
    with pytest.raises(Busy) as refused:
        syncing.admit()
    assert refused.value.retry_after_s == 30
