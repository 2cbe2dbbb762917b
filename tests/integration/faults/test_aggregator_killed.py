"""SIGKILL of the aggregator while 200 agents stream: they reconnect promptly once it is back
(its port opens first and holds their streams until the stored nodes are loaded, then the
syncing cap paces them: ingest/port.py, ingest/syncing.py), resync, and the change history
has every change the aggregator saw exactly once.

The 200 agents are real StreamClients (gRPC on loopback) in one thread of the test process,
as bench/fact_to_metric.py runs them: 200 `plumb-agent` processes would not fit two cores.
"""

from __future__ import annotations

import signal
import time

from conftest import scrape, until

from plumb import facts as wire
from plumb.aggregator.store import Store

from .conftest import DbAggregator, FakeNode

N = 200
PATH = "driver.driver_version"
BASE = {
    "host.kernel": wire.Reading.ok("6.8.0-1030-aws"),
    "gpus[0].index": wire.Reading.ok(0),
    "gpus[0].name": wire.Reading.ok("NVIDIA L4"),
}


def _live(agg: DbAggregator) -> dict[str, tuple[bool, str | None]]:
    return {n["name"]: (n["connected"], n["driver_version"]) for n in agg.json("/v1/nodes")}


def _pending(agg: DbAggregator) -> float:
    return next(v for n, _, v in scrape(agg) if n == "plumb_store_pending_updates")


def _chain(store: Store, node: str) -> list[str]:
    """The node's driver versions as the history tells them, oldest first; checks continuity.

    A node's first facts are not history rows, so the chain starts at the initial r0.
    """
    rows = [h for h in reversed(store.history(node, limit=1000)) if h.path == PATH]
    values = ["r0"]
    for row in rows:
        assert row.old is not None and row.old.value == values[-1], f"{node}: gap before {row}"
        assert row.new is not None
        values.append(str(row.new.value))
    return values


def test_agents_resync_after_sigkill_and_history_is_exact(tmp_path, fleet_factory):
    agg = DbAggregator(tmp_path, extra_env={"PLUMB_LOG_LEVEL": "WARNING"}).start()
    nodes = [FakeNode(f"kill-{i:03d}", {**BASE, PATH: wire.Reading.ok("r0")}) for i in range(N)]
    fleet = fleet_factory(
        agg.grpc,
        nodes,
        poll_interval_s=0.2,
        reconnect_window_s=1.0,
        # Far above the window: time spent unreachable must not grow the delay towards it.
        backoff_max_s=20.0,
        probe_max_s=0.5,
        heartbeat_interval_s=5.0,
    )
    until(lambda: sum(c for c, _ in _live(agg).values()) == N, timeout=90, what="200 agents up")
    # Their first facts are stored before the changes start: the chain begins at r0.
    until(lambda: _pending(agg) == 0, timeout=60, what="first facts stored")

    for n in nodes:  # round 1 goes out; the kill lands while some of it is in flight
        n.set(PATH, "r1")
    time.sleep(0.3)
    before = fleet.connections()
    agg.stop(signal.SIGKILL)

    time.sleep(1.0)
    for n in nodes[::2]:  # round 2 happens while the aggregator is down
        n.set(PATH, "r2")
    restarted = DbAggregator(tmp_path, grpc=agg.grpc, http_port=agg.http_port)
    restarted.extra_env = agg.extra_env
    up_at = time.monotonic()
    restarted.start()
    ready_s = time.monotonic() - up_at

    reconnected: dict[int, float] = {}
    deadline = time.monotonic() + 90
    while len(reconnected) < N and time.monotonic() < deadline:
        now = time.monotonic()
        for i, count in enumerate(fleet.connections()):
            if count > before[i] and i not in reconnected:
                reconnected[i] = now - up_at
        time.sleep(0.02)
    try:
        assert len(reconnected) == N, f"{N - len(reconnected)} agents never reconnected"
        expected = {n.name: n.facts[PATH].value for n in nodes}
        until(
            lambda: _live(restarted) == {k: (True, v) for k, v in expected.items()},
            timeout=60,
            what="every node connected with its current facts",
        )
        for n in nodes:  # round 3, after everyone is back
            n.set(PATH, "r3")
        until(
            lambda: _live(restarted) == {n.name: (True, "r3") for n in nodes},
            timeout=60,
            what="round 3 live",
        )
    finally:
        assert restarted.stop() == 0  # SIGTERM: flushes what is buffered

    times = sorted(reconnected.values())
    # Promptly: within about one window (1 s) and one probe (0.5 s) of the aggregator being
    # back, although each agent failed several times while it was down (a backoff that grew
    # with those failures would reach 8-20 s).
    assert times[-1] < ready_s + 4.0, (ready_s, times[-5:])

    store = Store(agg.db)
    try:
        for i, n in enumerate(nodes):
            chain = _chain(store, n.name)
            if i % 2:  # r1 was live when the aggregator came back, so its row must be there
                assert chain == ["r0", "r1", "r3"], (n.name, chain)
            else:  # r1 may have died with the aggregator, unseen: then r0 -> r2 directly
                assert chain in (["r0", "r1", "r2", "r3"], ["r0", "r2", "r3"]), (n.name, chain)
        assert {s.name: s.facts[PATH].value for s in store.load()} == {n.name: "r3" for n in nodes}
    finally:
        store.close()
