"""Writer: batching, overflow, retry through a store outage, isolation of bad updates."""

import asyncio
import math
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime

import pytest

from plumb.aggregator.drift import Baseline, DriftFinding
from plumb.aggregator.store import Change, NodeUpdate, StoreError, Writer
from plumb.facts import Reading

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _update(i: int, node: str = "n") -> NodeUpdate:
    change = Change(f"gpus[0].f{i}", None, Reading.ok(i))
    return NodeUpdate(node, T0, (change,), facts={change.path: change.new})


class FlakyStore:
    """A Store stand-in whose apply fails ``failures`` times, then records what it gets."""

    def __init__(self, failures: int = 0, *, retryable: bool = True) -> None:
        self.failures = failures
        self.retryable = retryable
        self.batches: list[list[NodeUpdate]] = []
        self.calls = 0
        self.on_apply: Callable[[], None] = lambda: None

    def apply(self, updates: Sequence[NodeUpdate]) -> int:
        self.calls += 1
        self.on_apply()
        if self.failures:
            self.failures -= 1
            raise StoreError("database is down", retryable=self.retryable)
        self.batches.append(list(updates))
        return sum(len(u.changes) for u in updates)


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Writer], None]]:
    """Starts writers' run tasks and cancels them at the end, checking they exit cleanly."""
    tasks: list[asyncio.Task[None]] = []
    yield lambda writer: tasks.append(asyncio.create_task(writer.run()))
    for task in tasks:
        task.cancel()
    for task in tasks:
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_many_updates_land_in_few_batches(store, running):
    n, batch_max = 1234, 500
    writer = Writer(store, batch_max=batch_max)
    assert all(writer.submit(_update(i, node=f"node-{i % 7}")) for i in range(n))
    assert writer.pending == n
    running(writer)
    await writer.flush()
    assert writer.pending == 0
    assert writer.written_changes == n
    assert writer.batches <= math.ceil(n / batch_max) + 1
    assert sum(len(store.history(f"node-{k}", limit=n)) for k in range(7)) == n
    assert writer.healthy and writer.dropped == 0


async def test_drift_transitions_are_queued_and_written_when_the_queue_is_full(store, running):
    writer = Writer(store, queue_max=1)
    assert writer.submit(_update(0))
    assert not writer.submit(_update(1))  # facts: refused, the agent resyncs
    finding = DriftFinding(
        id="f1", node="n", kind="recipe", component="driver", expected="580", observed="550",
        severity="critical", remediation="upgrade", recipe_hash="a" * 64, opened_at=T0,
    )  # fmt: skip
    baseline = Baseline({}, 8, T0)
    assert writer.submit(NodeUpdate("n", T0, opened=(finding,)))
    assert writer.submit(NodeUpdate("n", T0, baseline=baseline))
    assert not writer.submit(_update(2))  # the transitions count against the facts' room
    assert writer.dropped == 2 and writer.pending == 3
    running(writer)
    await writer.flush()
    assert store.findings(node="n") == [finding]
    assert store.load_drift()[1] == {"n": baseline}


async def test_a_full_queue_refuses_and_counts_the_overflow():
    writer = Writer(FlakyStore(), queue_max=3)
    assert [writer.submit(_update(i)) for i in range(5)] == [True, True, True, False, False]
    assert writer.dropped == 2 and writer.pending == 3


async def test_a_store_outage_delays_the_batch_without_losing_it(running):
    store = FlakyStore(failures=3)
    writer = Writer(store, backoff_min_s=0.001, backoff_max_s=0.002)
    health_seen: list[bool] = []
    store.on_apply = lambda: health_seen.append(writer.healthy)
    for i in range(10):
        writer.submit(_update(i))
    running(writer)
    await writer.flush()
    assert health_seen == [True, False, False, False]
    assert writer.healthy
    assert [u for batch in store.batches for u in batch] == [_update(i) for i in range(10)]
    assert writer.written_changes == 10 and writer.rejected == 0


async def test_updates_submitted_during_an_outage_are_written_in_order(running):
    store = FlakyStore(failures=2)
    writer = Writer(store, batch_max=4, backoff_min_s=0.001)
    writer.submit(_update(0))
    running(writer)
    for i in range(1, 9):
        writer.submit(_update(i))
    await writer.flush()
    assert [u for batch in store.batches for u in batch] == [_update(i) for i in range(9)]


async def test_flush_times_out_while_the_store_stays_down(running):
    writer = Writer(
        FlakyStore(failures=10**6), linger_s=0, backoff_min_s=0.001, backoff_max_s=0.001
    )
    writer.submit(_update(0))
    running(writer)
    with pytest.raises(TimeoutError):
        await writer.flush(timeout_s=0.05)
    assert not writer.healthy and writer.pending == 1


async def test_a_bad_update_is_dropped_alone_and_the_rest_are_written(store, running):
    writer = Writer(store)
    good = [_update(i) for i in range(5)]
    bad = NodeUpdate("x" * 300, T0)
    for update in good[:2] + [bad] + good[2:]:
        writer.submit(update)
    running(writer)
    await writer.flush()
    assert writer.rejected == 1 and writer.healthy
    assert writer.written_changes == 5
    assert len(store.history("n")) == 5


async def test_cancelling_mid_write_keeps_unwritten_updates_pending(store):
    entered, release = threading.Event(), threading.Event()

    class SlowStore(FlakyStore):
        def apply(self, updates: Sequence[NodeUpdate]) -> int:
            entered.set()
            release.wait(timeout=5)
            return super().apply(updates)

    slow = SlowStore()
    writer = Writer(slow, batch_max=2, linger_s=0)
    for i in range(3):
        writer.submit(_update(i))
    task = asyncio.create_task(writer.run())
    await asyncio.to_thread(entered.wait, 5)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.batches == [[_update(0), _update(1)]]
    assert writer.pending == 1 and writer.batches == 1

    # A new run picks up where the cancelled one stopped.
    task = asyncio.create_task(writer.run())
    await writer.flush()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.batches[-1] == [_update(2)] and writer.pending == 0


async def test_run_twice_at_once_is_refused(running):
    writer = Writer(FlakyStore())
    running(writer)
    second = asyncio.create_task(writer.run())  # tasks start in order: this one comes second
    with pytest.raises(RuntimeError):
        await second
