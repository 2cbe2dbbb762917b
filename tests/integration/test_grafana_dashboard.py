"""Every query of the shipped Grafana dashboard, run in a real Prometheus against a live fleet.

A real aggregator with simulated agents (one drifted, one with XID 79 on a GPU, one validation
run finished) is scraped
by the real Prometheus of prom_fixture, with deploy/prometheus/rules.yml loaded so the recording
rules the panels use exist. `$job` is the fixture's scrape job (one chosen job); the other
variables match all, as "All" does (`$node` and `$cluster` → `.*`, as on a Prometheus that
scrapes one cluster and adds no `cluster` label). Each expression must return data, except the
benchmark panel: simulated nodes skip benchmarks, so its query must only be valid PromQL.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import Aggregator, until
from prom_fixture import Prometheus, prometheus  # noqa: F401  (fixture)

from plumb.aggregator.metrics.sensors import FAMILIES

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "plumb.json"
VARIABLE = re.compile(r"\$\{?(\w+)\}?")
# Series that simulated nodes never produce (benchmarks skip on a simulated node).
EMPTY_IN_SIMULATION = {"Benchmark ratio to peak"}
PROM_WAIT = 30.0
# The series of /metrics/sensors (the GPU readings and the power limit beside the draw).
READINGS = tuple(name for name, *_ in FAMILIES)


def panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # collapsed rows hold their panels
    return [p for p in out if p["type"] != "row"]


def concrete(expr: str) -> str:
    """The expression with the job prom_fixture scrapes chosen, other variables as 'All'."""
    builtins = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m", "job": "plumb"}
    return VARIABLE.sub(lambda m: builtins.get(m.group(1), ".*"), expr)


def test_the_dashboard_is_well_formed() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "cluster", "job", "node"} <= names
    for panel in panels(dashboard):
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and panel.get("description"), panel["title"]
        for target in panel["targets"]:
            assert target["expr"] and target["refId"], panel["title"]
            # Every node series the dashboard reads comes from Plumb, of the chosen cluster and
            # job (a Prometheus may scrape several Plumb installations). The GPU readings come
            # from /metrics/sensors, which the chart scrapes apart as its own job: those are
            # picked by cluster and node, never by the /metrics job.
            expr = target["expr"]
            assert "plumb_" in expr, expr
            readings = sum(expr.count(f"{name}{{") for name in READINGS)
            assert expr.count('cluster=~"$cluster"') == expr.count("plumb_"), expr
            assert expr.count('job=~"$job"') == expr.count("plumb_") - readings, expr
    for note in dashboard["annotations"]["list"]:
        assert note["datasource"]["uid"] == "${datasource}", note["name"]
        for selector in ('cluster=~"$cluster"', 'job=~"$job"', 'node=~"$node"'):
            assert note["expr"].count(selector) == note["expr"].count("plumb_"), note["expr"]


def test_every_panel_query_returns_data_while_the_fleet_runs(
    aggregator: Aggregator,
    start_agent,
    prometheus: Prometheus,  # noqa: F811
) -> None:
    sick = start_agent(aggregator, "eks-h100-1", "dgx-h100")
    drifting = start_agent(aggregator, "eks-h100-2", "dgx-h100")
    start_agent(aggregator, "gke-a100-1", "hgx-a100")
    until(lambda: len(aggregator.json("/v1/nodes")) == 3, what="three nodes")
    drifting.edit(lambda spec: spec["driver"].update(version="595.45.04"))
    until(lambda: aggregator.json("/v1/drift", severity="critical"), what="critical drift")
    # A health finding for the GPU health row: GPU 3 falls off the bus.
    sick.edit(lambda spec: spec.update(xids=[{"gpu": 3, "code": 79, "after_s": 0}]))
    until(
        lambda: aggregator.json("/v1/drift", node="eks-h100-1", kind="health"),
        what="a health finding",
    )
    run = aggregator_post(aggregator, "/v1/validations", {"phases": ["deployment", "conformance"]})
    until(
        lambda: aggregator.json(f"/v1/validations/{run['id']}")["state"] == "finished",
        timeout=60,
        what="the validation run to finish",
    )

    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        (panel["title"], concrete(target["expr"]))
        for panel in panels(dashboard)
        for target in panel["targets"]
    ]
    assert len(queries) >= 15
    for title, expr in queries:
        if title in EMPTY_IN_SIMULATION:
            prometheus.query(expr)  # valid PromQL: Prometheus answers success
            continue
        until(
            lambda expr=expr: prometheus.query(expr),
            timeout=PROM_WAIT,
            what=f"data for panel {title!r}: {expr}",
        )

    # The stack-change annotation marks the node whose driver moved, at its new version.
    (note,) = dashboard["annotations"]["list"]
    until(
        lambda: any(
            s["metric"].get("node") == "eks-h100-2"
            and s["metric"].get("driver_version") == "595.45.04"
            for s in prometheus.query(concrete(note["expr"]))
        ),
        timeout=PROM_WAIT,
        what="the stack-change annotation for eks-h100-2's new driver",
    )


def aggregator_post(aggregator: Aggregator, path: str, body: dict) -> dict:
    resp = aggregator.post(path, json=body)
    resp.raise_for_status()
    return resp.json()
