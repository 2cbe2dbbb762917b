"""Two `plumb serve` replicas on one real PostgreSQL, agents streaming to each.

Both answer reads with the same nodes, facts, connection state and drift findings; each
finding is stored once; each node's series and the cluster-wide ones come from one replica;
a node removed on one is forgotten by the other.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import scrape, until
from faults.conftest import DbAggregator
from sqlalchemy import create_engine, text

OUTSIDE_RECIPE = "595.45.04"  # another driver branch than the recipe's R580
NODES = ("h100-0", "h100-1", "h100-2", "h100-3")
# Short timers so a killed replica's node goes stale, and its series move, within seconds.
ENV = {
    "PLUMB_INGEST__HEARTBEAT_INTERVAL_S": "1",
    "PLUMB_INGEST__IDLE_TIMEOUT_S": "4",
    "PLUMB_REPLICA__ALIVE_S": "3",
}


@pytest.fixture
def replicas(tmp_path: Path, pg_url: str) -> Iterator[tuple[DbAggregator, DbAggregator]]:
    started = []
    try:
        for name in ("replica-a", "replica-b"):
            workdir = tmp_path / name
            workdir.mkdir()
            agg = DbAggregator(
                workdir, database=pg_url, extra_env={**ENV, "PLUMB_REPLICA__NAME": name}
            )
            started.append(agg)
            agg.start()
        yield started[0], started[1]
    finally:
        for agg in started:
            if agg.proc is not None:
                agg.stop()


def _views(a: DbAggregator, b: DbAggregator, path: str, **params) -> object:
    """The JSON at `path` when both replicas answer the same, else None.

    What differs by design (_PER_REPLICA) is left out; everything else must be equal.
    """
    seen_a, seen_b = (_steady(agg.json(path, **params)) for agg in (a, b))
    return seen_a if seen_a == seen_b else None


# Heartbeat times lag a poll on the other replica, and so does when each saw a stack change;
# sensor readings live only on the replica holding the node's stream (docs/replicas.md).
_PER_REPLICA = frozenset({"last_report_at", "sensors", "stack_since"})


def _steady(doc: object) -> object:
    if isinstance(doc, list):
        return [_steady(x) for x in doc]
    if isinstance(doc, dict):
        return {k: _steady(v) for k, v in doc.items() if k not in _PER_REPLICA}
    return doc


def _open_rows(url: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT node, kind, component FROM drift_findings WHERE closed_at IS NULL")
            )
            return sorted(tuple(r) for r in rows)
    finally:
        engine.dispose()


def _node_series(agg: DbAggregator) -> set[str]:
    return {labels["node"] for name, labels, _ in scrape(agg) if name == "plumb_agent_connected"}


def test_replicas_on_one_database_answer_alike_and_store_findings_once(
    replicas, start_agent, pg_url
):
    a, b = replicas
    agents = [start_agent(agg, name) for agg, name in zip((a, a, b, b), NODES, strict=True)]
    nodes = until(
        lambda: (
            (rows := _views(a, b, "/v1/nodes"))
            and [n["name"] for n in rows if n["connected"]] == list(NODES)
            and rows
        ),
        what="both replicas listing every node connected",
    )
    assert {n["driver_version"] for n in nodes} == {"580.173.02"}
    for name in NODES:
        until(lambda name=name: _views(a, b, f"/v1/nodes/{name}"), what=f"{name} alike")

    # A drift on a node of replica a: both replicas evaluate it (and its pool) and agree.
    agents[0].edit(lambda spec: spec["driver"].update(version=OUTSIDE_RECIPE))
    found = until(
        lambda: (
            (f := _views(a, b, "/v1/drift"))
            and {(x["node"], x["kind"]) for x in f}
            >= {(NODES[0], "constraint"), (NODES[0], "baseline"), (NODES[0], "pool")}
            and f
        ),
        what="the same findings on both replicas",
    )
    rows = _open_rows(pg_url)
    assert rows == sorted((f["node"], f["kind"], f["component"]) for f in found)
    assert len(rows) == len(set(rows))  # the unique index: one open row per finding

    # Each node's series from the replica holding its stream; pool gauges from one replica.
    assert _node_series(a) == {NODES[0], NODES[1]} and _node_series(b) == {NODES[2], NODES[3]}
    pools = [
        sum(1 for name, *_ in scrape(agg) if name == "plumb_pool_driver_versions") for agg in (a, b)
    ]
    assert pools[0] > 0 and pools[1] == 0  # replica-a is first by name

    # A baseline accepted on replica b for a node of replica a: both close its finding.
    b.post(f"/v1/nodes/{NODES[0]}/baseline").raise_for_status()
    until(
        lambda: (
            (f := _views(a, b, "/v1/drift", node=NODES[0]))
            and "baseline" not in {x["kind"] for x in f}
        ),
        what="the baseline finding closed on both replicas",
    )
    assert ("baseline",) not in {r[1:2] for r in _open_rows(pg_url)}

    # An agent leaving replica b shows disconnected on both.
    agents[2].proc.terminate()
    agents[2].proc.wait(10)
    until(
        lambda: (
            (rows := _views(a, b, "/v1/nodes"))
            and [n["name"] for n in rows if not n["connected"]] == [NODES[2]]
        ),
        what="both replicas showing the stopped agent disconnected",
    )
    assert _node_series(b) == {NODES[2], NODES[3]}  # b held h100-2 last and is alive

    # The stopped agent's node removed on replica a: b forgets it too, from the row a wrote.
    a.delete(f"/v1/nodes/{NODES[2]}").raise_for_status()
    until(
        lambda: (rows := _views(a, b, "/v1/nodes")) and NODES[2] not in {n["name"] for n in rows},
        what="both replicas forgetting the removed node",
    )
    assert b.node(NODES[2]) is None
    kept = set(NODES) - {NODES[2]}

    # Replica b killed outright: its nodes go stale on a, and a exports their series.
    b.stop(signal.SIGKILL)
    until(
        lambda: not a.node(NODES[3])["connected"] and a.node(NODES[0])["connected"],
        what="a showing b's streaming node disconnected once its last report is old",
    )
    until(lambda: _node_series(a) == kept, what="a exporting the nodes of a dead replica")


def _messages(agg: DbAggregator, kind: str) -> float:
    return sum(
        v
        for name, labels, v in scrape(agg)
        if name == "plumb_ingest_messages_total" and labels["type"] == kind
    )


def test_sensor_reports_standing_in_for_heartbeats_keep_the_node_live_on_the_other_replica(
    replicas, start_agent
):
    # Reports every 0.3 s, heartbeats due every 1 s: Welcome lets the reports stand in for
    # them. Replica b sees the node only through the rows a writes, and disconnects it once
    # its report time is older than the idle timeout (4 s).
    a, b = replicas
    start_agent(a, NODES[0], "dgx-h100", "--sensor-interval", "0.3")
    until(lambda: (n := b.node(NODES[0])) and n["connected"], what="b seeing the node connected")
    until(lambda: _messages(a, "sensors") > 0, what="the first sensor reports")
    beats, reports = _messages(a, "heartbeat"), _messages(a, "sensors")
    first = b.node(NODES[0])["last_report_at"]
    live: list[bool] = []

    def watched() -> bool:
        live.append(b.node(NODES[0])["connected"])
        return _messages(a, "sensors") >= reports + 40

    # 40 more reports span 12 s or more: three idle timeouts.
    until(watched, timeout=60, what="40 more sensor reports")
    # At most one heartbeat (a report held up on a busy machine) leaves a stretch of over
    # 4 s with reports alone, and b kept the node live all along.
    assert _messages(a, "heartbeat") - beats <= 1, "the reports stood in for the heartbeats"
    assert all(live), "b kept the node live from the reports' report times"
    assert b.node(NODES[0])["last_report_at"] > first
