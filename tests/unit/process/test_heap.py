"""The collector's policy: survivors of a full pass are frozen; the periodic pass finds
cycles that died among frozen objects."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from plumb.aggregator.heap import Heap


class _Node:
    """A tracked object that can sit in a cycle."""

    peer: _Node | None = None


@pytest.fixture
async def heap():
    gc.unfreeze()
    h = Heap(full_pass_s=3600)
    task = asyncio.create_task(h.run())
    await asyncio.sleep(0)  # run() registers its callback before its first await
    yield h
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    gc.unfreeze()


async def test_survivors_of_a_full_pass_are_frozen(heap):
    survivor = [_Node() for _ in range(100)]
    gc.collect()  # a full pass, as the collector runs one itself
    await asyncio.sleep(0)  # the freeze is scheduled on the loop
    assert gc.get_freeze_count() >= len(survivor)
    assert not any(gc.is_tracked(n) and n in gc.get_objects(generation=2) for n in survivor)


async def test_a_younger_pass_freezes_nothing(heap):
    gc.collect(generation=1)
    await asyncio.sleep(0)
    assert gc.get_freeze_count() == 0


async def test_the_periodic_pass_collects_a_cycle_that_died_frozen(heap):
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
