"""The collector's policy: survivors of a middle or full pass are frozen, the middle
generation is collected after every three young passes; the periodic pass finds cycles that died
among frozen objects."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from plumb.aggregator import heap


class _Node:
    """A tracked object that can sit in a cycle."""

    peer: _Node | None = None


@pytest.fixture(autouse=True)
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_survivors_of_a_full_pass_are_frozen():
    survivor = [_Node() for _ in range(100)]
    with heap.freezing():
        gc.collect()  # a full pass, as the collector runs one itself
    assert gc.get_freeze_count() >= len(survivor)
    assert not any(n in gc.get_objects(generation=2) for n in survivor)


def test_survivors_of_a_middle_pass_are_frozen():
    survivor = [_Node() for _ in range(100)]
    with heap.freezing():
        gc.collect(generation=1)
    assert gc.get_freeze_count() >= len(survivor)


def test_a_young_pass_freezes_nothing():
    with heap.freezing():
        gc.collect(generation=0)
    assert gc.get_freeze_count() == 0


def test_the_middle_generation_is_collected_every_third_young_pass_while_freezing():
    before = gc.get_threshold()
    with heap.freezing():
        assert gc.get_threshold() == (before[0], 2, before[2])
    assert gc.get_threshold() == before


def test_outside_freezing_a_full_pass_freezes_nothing():
    with heap.freezing():
        pass
    gc.collect()
    assert gc.get_freeze_count() == 0


def test_the_periodic_pass_collects_a_cycle_that_died_frozen():
    a, b = _Node(), _Node()
    a.peer, b.peer = b, a
    gone = weakref.ref(a)
    gc.freeze()
    del a, b
    gc.collect()  # frozen: a plain full pass does not see the dead cycle
    assert gone() is not None
    assert heap.full_pass() >= 2
    assert gone() is None
    assert gc.get_freeze_count() > 0  # the survivors are frozen again


def test_a_young_pass_collects_the_middle_generation_after_every_third():
    with heap.freezing():
        gc.collect(generation=1)  # the middle generation's turn starts over
        passes = [heap.young_pass() for _ in range(8)]
    assert passes == [0, 0, 0, 1, 0, 0, 0, 1]


async def test_run_starts_young_passes_on_its_timer(monkeypatch):
    ran = asyncio.Event()
    count = 0

    def counted() -> int:
        nonlocal count
        count += 1
        if count == 3:
            ran.set()
        return 0

    monkeypatch.setattr(heap, "YOUNG_EVERY_S", 0.001)
    monkeypatch.setattr(heap, "young_pass", counted)
    task = asyncio.create_task(heap.run(full_pass_s=3600))
    try:
        await asyncio.wait_for(ran.wait(), timeout=10)
    finally:
        task.cancel()
    assert count >= 3
