"""What the terminal and the web page show, decided once; and the canned API data the CLI and
web tests render is the API's own shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter

from plumb.aggregator.api.models import ChangeOut, FindingOut, NodeDetailOut, NodeOut
from plumb.aggregator.present import age, gpu_cell, severity_order, summary_rows

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
