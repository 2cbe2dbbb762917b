"""Drift findings and baselines in SQL: lifetimes, restore, queries, and the 0001 upgrade."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

import plumb.aggregator.store.store as store_module
from plumb.aggregator.drift import Baseline, DriftFinding
from plumb.aggregator.store import Change, NodeUpdate, Store
from plumb.facts import Reading

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)


def finding(node: str = "n1", component: str = "driver", **kw) -> DriftFinding:
    fields = dict(
        id=f"{node}-{component}",
        node=node,
        kind="recipe",
        component=component,
        expected="580.173.02",
        observed="595.45.04",
        severity="critical",
        remediation="roll back",
        recipe_hash="a" * 64,
        opened_at=T0,
    )
    return DriftFinding(**(fields | kw))


def test_opened_findings_load_until_closed_and_stay_queryable(store: Store):
    f = finding()
    store.apply([NodeUpdate(node="n1", at=T0, opened=(f,))])
    assert store.load_drift()[0] == [f]
    store.apply([NodeUpdate(node="n1", at=T0, closed=(replace(f, closed_at=T0 + timedelta(1)),))])
    assert store.load_drift()[0] == []
    (history,) = store.findings(node="n1")
    assert history.closed_at == T0 + timedelta(1)
    assert store.findings(kind="pool") == []
    assert store.findings(since=T0 + timedelta(2)) == []


def test_reapplying_an_opened_finding_is_harmless(store: Store):
    update = NodeUpdate(node="n1", at=T0, opened=(finding(),))
    store.apply([update])
    store.apply([update])  # a batch retried after a lost commit acknowledgement
    assert len(store.findings()) == 1


def test_baselines_round_trip_and_replace(store: Store):
    facts = {
        "driver.driver_version": Reading.ok("580.173.02"),
        "gpus[0].vbios_version": Reading.not_supported(),
    }
    store.apply([NodeUpdate(node="n1", at=T0, baseline=Baseline(facts, 8, T0))])
    assert store.load_drift()[1] == {"n1": Baseline(facts, 8, T0)}
    store.apply([NodeUpdate(node="n1", at=T0, baseline=Baseline({}, 7, T0 + timedelta(1)))])
    assert store.load_drift()[1]["n1"].gpu_count == 7


def test_baselines_equal_in_python_but_not_in_type_come_back_as_written(store: Store):
    # Loaded baselines share each distinct reading between nodes: True and 1, False and 0,
    # 0.0 and -0.0 are equal keys in Python, yet each node must get back what it accepted.
    first = {"a": Reading.ok(1), "b": Reading.ok(False), "c": Reading.ok(0.0)}
    second = {"a": Reading.ok(True), "b": Reading.ok(0), "c": Reading.ok(-0.0)}
    store.apply(
        [
            NodeUpdate(node="n1", at=T0, baseline=Baseline(first, 8, T0)),
            NodeUpdate(node="n2", at=T0, baseline=Baseline(second, 8, T0)),
            NodeUpdate(node="n3", at=T0, baseline=Baseline(first, 8, T0)),
        ]
    )
    baselines = store.load_drift()[1]
    shown = {
        node: {p: (type(r.value), str(r.value)) for p, r in b.facts.items()}
        for node, b in baselines.items()
    }
    assert shown["n3"] == shown["n1"]
    assert shown["n1"] == {"a": (int, "1"), "b": (bool, "False"), "c": (float, "0.0")}
    assert shown["n2"] == {"a": (bool, "True"), "b": (int, "0"), "c": (float, "-0.0")}
    assert baselines["n1"].facts["a"] is baselines["n3"].facts["a"]  # one object, shared


def test_upgrading_a_0001_database_keeps_its_rows(url: str):
    config = Config()
    config.set_main_option(
        "script_location", str(Path(store_module.__file__).with_name("migrations"))
    )
    config.set_main_option("sqlalchemy.url", url)
    command.upgrade(config, "0001")
    engine = create_engine(url)
    try:
        with engine.begin() as db:
            for i in range(3):
                db.execute(
                    text(
                        "INSERT INTO nodes VALUES"
                        " (:n, 'b', 'v', false, '2026-01-01 00:00:00', NULL)"
                    ),
                    {"n": f"other-{i}"},
                )
            db.execute(
                text(
                    "INSERT INTO nodes VALUES"
                    " ('old-node', 'b', 'v', false, '2026-01-01 00:00:00', NULL)"
                )
            )
            db.execute(
                text("INSERT INTO facts VALUES ('old-node', 'host.kernel', 'ok', '\"6.8\"', NULL)")
            )
            db.execute(
                text(
                    "INSERT INTO fact_changes (node, path, old, new, at) VALUES ('old-node', "
                    '\'host.kernel\', NULL, \'{"status":"ok","value":"6.8"}\', '
                    "'2026-01-01 00:00:00')"
                )
            )
    finally:
        engine.dispose()
    store = Store(url)  # upgrades to head
    try:
        assert [n.name for n in store.load()] == ["old-node", "other-0", "other-1", "other-2"]
        node = store.load()[0]
        assert node.facts == {"host.kernel": Reading.ok("6.8")}
        assert node.content_hash is None  # rows from before 0004: hashed when loaded
        assert [h.path for h in store.history("old-node")] == ["host.kernel"]
        store.apply(
            [
                NodeUpdate(
                    node="old-node",
                    at=T0,
                    opened=(finding("old-node"),),
                    changes=(Change("host.kernel", Reading.ok("6.8"), Reading.ok("6.9")),),
                    facts={"host.kernel": Reading.ok("6.9")},
                )
            ]
        )
        assert len(store.findings(node="old-node")) == 1
    finally:
        store.close()
