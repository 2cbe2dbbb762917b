"""What the terminal and the web page show, decided once; and the canned API data the CLI and
web tests render is the API's own shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter

from plumb.aggregator.api.models import ChangeOut, FindingOut, NodeDetailOut, NodeOut
from plumb.aggregator.present import (
    GPU_COLUMNS,
    HEALTH_COLUMNS,
    age,
    gpu_cell,
    gpu_findings,
    severity_order,
    summary_rows,
    xid_texts,
)
from plumb.aggregator.recipes import load_catalog

API = json.loads((Path(__file__).parents[1] / "cli" / "data" / "api.json").read_text())
NOW = datetime(2026, 7, 1, 3, 0, 0, tzinfo=UTC)


def test_the_canned_api_answers_are_valid_api_models() -> None:
    TypeAdapter(list[NodeOut]).validate_python(API["/v1/nodes"])
    NodeDetailOut.model_validate(API["/v1/nodes/node-b"])
    TypeAdapter(list[FindingOut]).validate_python(API["/v1/drift"])
    TypeAdapter(list[FindingOut]).validate_python(API["/v1/nodes/node-b/drift"])
    TypeAdapter(list[ChangeOut]).validate_python(API["/v1/nodes/node-b/history"])


def test_severity_order_ranks_critical_then_warning_then_name() -> None:
    rows = [
        {"name": "c", "findings": {"warning": 3}},
        {"name": "b", "findings": {"critical": 1}},
        {"name": "d", "findings": {"info": 5}},
        {"name": "a", "findings": {}},
    ]
    assert [r["name"] for r in sorted(rows, key=severity_order)] == ["b", "c", "d", "a"]


def test_ages_read_like_a_person_would_say_them() -> None:
    assert age(None, NOW) == "never"
    assert age("2026-07-01T02:59:50Z", NOW) == "10s ago"
    assert age("2026-07-01T02:10:00+00:00", NOW) == "50m ago"
    assert age("2026-06-30T23:00:00Z", NOW) == "4h ago"


def test_gpu_memory_shows_in_gib_and_a_missing_reading_says_why() -> None:
    gpu = {
        "memory_total_bytes": {"status": "ok", "value": 85899345920},  # 80 GiB
        "pcie_link_width_current": {"status": "ok", "value": 8},
        "pcie_link_width_max": {"status": "not_supported"},
    }
    assert gpu_cell(gpu, ("memory_total_bytes",)) == [("80 GiB", True)]
    assert gpu_cell(gpu, ("pcie_link_width_current", "pcie_link_width_max")) == [
        ("8", True),
        ("not_supported", False),
    ]


def test_the_node_summary_names_its_stack_in_a_fixed_order() -> None:
    rows = dict(summary_rows(API["/v1/nodes/node-b"], NOW))
    assert list(rows)[:3] == ["State", "Last report", "Pool"]
    assert rows["GPUs"] == "8 × H100 80GB HBM3"
    assert rows["Driver"] == "595.45.04"


def test_each_column_is_marked_by_the_health_rules_over_the_facts_it_shows() -> None:
    """The names the tables look for are recipes/drift.yaml's: a renamed rule must not leave
    its column unmarked."""
    rules = {r.name: r.fact for r in load_catalog().drift.health.gpus}
    marked = {name: c.keys for c in GPU_COLUMNS + HEALTH_COLUMNS for name in c.findings}
    assert set(marked) == set(rules)
    for name, fact in rules.items():
        assert fact in marked[name], name


def test_health_findings_group_by_gpu_and_recent_xids_come_newest_first() -> None:
    findings = [
        {"kind": "health", "component": "gpu5/xid-63", "severity": "warning"},
        {"kind": "health", "component": "gpus/missing", "severity": "critical"},
        {"kind": "recipe", "component": "driver", "severity": "critical"},
        {"kind": "health", "component": "gpu12/nvlink-down", "severity": "warning"},
    ]
    by_gpu = gpu_findings(findings)
    assert set(by_gpu) == {5, 12} and set(by_gpu[12]) == {"nvlink-down"}
    ok = lambda v: {"status": "ok", "value": v}  # noqa: E731
    gpu = {
        "xids": [
            # 2026-07-01 02:10:00 and 02:59:00 UTC
            {"code": ok(48), "count": ok(2), "last_seen_unix_s": ok(1782871800)},
            {"code": ok(63), "count": ok(1), "last_seen_unix_s": ok(1782874740)},
            {"code": ok(94), "count": {"status": "error", "error": "x"}, "last_seen_unix_s": {}},
        ]
    }
    assert xid_texts(gpu, by_gpu[5], NOW) == [
        ("63 ×1 (60s ago)", by_gpu[5]["xid-63"]),
        ("48 ×2 (50m ago)", None),
        ("94 ×error", None),
    ]


def test_sensor_readings_read_as_whole_watts_and_percent() -> None:
    gpu = {"sensors": {"power_draw_watts": 68.6, "gpu_utilization_ratio": 0.973}}
    assert gpu_cell(gpu, ("sensors.power_draw_watts",)) == [("69", True)]
    assert gpu_cell(gpu, ("sensors.gpu_utilization_ratio",)) == [("97", True)]
    assert gpu_cell(gpu, ("sensors.temperature_celsius",)) == [("-", False)]
