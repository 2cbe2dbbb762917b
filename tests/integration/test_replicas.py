"""Two `plumb serve` replicas on one real PostgreSQL, agents streaming to each.

Both answer reads with the same nodes, facts, connection state and drift findings; each
finding is stored once; each node's series and the cluster-wide ones come from one replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import scrape, until
from faults.conftest import DbAggregator
from sqlalchemy import create_engine, text

OUTSIDE_RECIPE = "595.45.04"  # another driver branch than the recipe's R580
NODES = ("h100-0", "h100-1", "h100-2")


@pytest.fixture
def replicas(tmp_path: Path, pg_url: str) -> Iterator[tuple[DbAggregator, DbAggregator]]:
    started = []
    try:
        for name in ("replica-a", "replica-b"):
            workdir = tmp_path / name
            workdir.mkdir()
            agg = DbAggregator(workdir, database=pg_url, extra_env={"PLUMB_REPLICA__NAME": name})
            started.append(agg)
            agg.start()
        yield started[0], started[1]
    finally:
        for agg in started:
            if agg.proc is not None:
                agg.stop()


def _views(a: DbAggregator, b: DbAggregator, path: str, **params) -> object:
    """The JSON at `path` when both replicas answer the same, else None."""
    seen_a, seen_b = a.json(path, **params), b.json(path, **params)
    return seen_a if seen_a == seen_b else None


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
    agents = [start_agent(a, NODES[0]), start_agent(a, NODES[1]), start_agent(b, NODES[2])]
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
            >= {(NODES[0], "recipe"), (NODES[0], "baseline"), (NODES[0], "pool")}
            and f
        ),
        what="the same findings on both replicas",
    )
    rows = _open_rows(pg_url)
    assert rows == sorted((f["node"], f["kind"], f["component"]) for f in found)
    assert len(rows) == len(set(rows))  # the unique index: one open row per finding

    # Each node's series from the replica holding its stream; pool gauges from one replica.
    assert _node_series(a) == {NODES[0], NODES[1]} and _node_series(b) == {NODES[2]}
    pools = [
        sum(1 for name, *_ in scrape(agg) if name == "plumb_pool_driver_versions") for agg in (a, b)
    ]
    assert pools[0] > 0 and pools[1] == 0  # replica-a is first by name

    # A baseline accepted on replica b for a node of replica a: both close its finding.
    httpx.post(f"{b.url}/v1/nodes/{NODES[0]}/baseline", timeout=10).raise_for_status()
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
    assert _node_series(b) == {NODES[2]}  # b held it last and is alive: still b's series
