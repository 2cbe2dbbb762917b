"""The collector's policy: survivors of a full pass are frozen; the periodic pass finds
cycles that died among frozen objects."""

from __future__ import annotations

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


def test_a_younger_pass_freezes_nothing():
    with heap.freezing():
        gc.collect(generation=1)
    assert gc.get_freeze_count() == 0


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
