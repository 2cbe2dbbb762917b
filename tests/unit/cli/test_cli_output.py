"""`plumb nodes`, `plumb node`, `plumb drift`, `plumb recipe --criteria` over a canned API.

The API answers are real ones captured from an aggregator with three simulated nodes, one of
them drifted (tests/unit/cli/data/api.json, timestamps pinned; conftest.py serves them). The
tables are compared with golden files of what a pipe receives: plain columns three spaces
apart, each as wide as its widest cell, down nodes first. nodes, nodes-wide and drift are
written by hand from api.json; ``PLUMB_UPDATE_GOLDEN=1`` rewrites them from the code, for a
diff to review, never to accept unread.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import API, FakeApi, run
from rich.console import Console
from typer.testing import CliRunner

import plumb.aggregator.cli.render as render
from plumb.aggregator.cli import app

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("PLUMB_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"missing golden {path.name}; run with PLUMB_UPDATE_GOLDEN=1"
    assert text == path.read_text()


def test_nodes_table_shows_status_pool_stack_findings_and_age(api: FakeApi) -> None:
    check_golden("nodes", run("nodes"))


def test_nodes_wide_adds_nccl_cuda_runtime_os_and_kernel(api: FakeApi) -> None:
    check_golden("nodes-wide", run("nodes", "-o", "wide"))


def test_node_shows_facts_gpus_findings_with_remediation_and_history(api: FakeApi) -> None:
    text = run("node", "node-b")
    check_golden("node", text)
    assert "host.kubelet_version" in text and "GPU-" in text
    assert "Roll the node to the recipe's driver" in text
    assert "recent changes" in text and "driver.driver_version" in text
    assert ("/v1/nodes/node-b/history", {"limit": 20}) in api.calls


def test_drift_table_and_its_exit_code_for_an_open_critical_finding(api: FakeApi) -> None:
    check_golden("drift", run("drift", code=1))


@pytest.mark.parametrize("args", [("nodes",), ("node", "node-b"), ("drift",)])
def test_piped_output_has_no_escape_codes(api: FakeApi, args: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, list(args))
    assert "\x1b" not in result.stdout


def test_json_and_yaml_output_are_the_api_documents(api: FakeApi) -> None:
    assert json.loads(run("nodes", "-o", "json")) == API["/v1/nodes"]
    assert yaml.safe_load(run("nodes", "-o", "yaml")) == API["/v1/nodes"]
    body = json.loads(run("node", "node-b", "--output", "json"))
    assert body["node"]["name"] == "node-b"
    assert body["findings"] == API["/v1/nodes/node-b/drift"]
    assert body["history"] == API["/v1/nodes/node-b/history"]


def test_nodes_filters_go_to_the_server(api: FakeApi) -> None:
    run("nodes", "--pool", "eks/h100/ubuntu/any/any", "--drifted", "-o", "json")
    assert api.calls[-1] == ("/v1/nodes", {"pool": "eks/h100/ubuntu/any/any", "drifted": "true"})


def test_recipe_reads_an_aicr_criteria_file_and_flags_override_it(
    api: FakeApi, tmp_path: Path
) -> None:
    path = tmp_path / "criteria.yaml"
    path.write_text(
        "kind: RecipeCriteria\napiVersion: aicr.run/v1alpha2\nmetadata: {name: x}\n"
        "spec: {service: eks, gpu: h100, intent: training, nodes: 8}\n"
    )
    run("recipe", "--criteria", str(path), "--intent", "inference", "-o", "json")
    path_, params = api.calls[-1]
    assert path_ == "/v1/recipe"
    assert params == {
        "service": "eks",
        "accelerator": "h100",
        "os": "any",
        "intent": "inference",
        "platform": "any",
        "nodes": 8,
    }


def test_recipe_rejects_a_file_that_is_not_recipe_criteria(api: FakeApi, tmp_path: Path) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text("kind: Snapshot\n")
    result = CliRunner().invoke(app, ["recipe", "-c", str(path)])
    assert result.exit_code == 2
    assert "expected kind RecipeCriteria" in result.stderr
    assert not [c for c in api.calls if c[0] == "/v1/recipe"]


def test_watch_view_puts_down_then_the_most_drifted_nodes_first(api: FakeApi) -> None:
    console = Console(width=160, record=True, file=io.StringIO())
    for renderable in render.watch_view("http://plumb", API["/v1/nodes"], [], None):
        console.print(renderable)
    text = console.export_text()
    assert text.index("node-c") < text.index("node-b") < text.index("node-a")


def test_on_a_terminal_what_opened_a_finding_shows_in_its_severity_s_colour(api: FakeApi) -> None:
    detail = API["/v1/nodes/node-b"]
    sheets = render.node_tables(detail, API["/v1/nodes/node-b/drift"], [])
    health = next(s for s in sheets if isinstance(s, render.Sheet) and "GPU health" in s.title)
    gpu3, gpu5 = health.rows[3], health.rows[5]
    assert gpu3[-2:] == ["[bold red]79 ×1 (30s ago)[/]", "[bold red]critical[/]: xid-79"]
    assert gpu5[4] == "[yellow]1/0[/]"  # REMAPPED PENDING/FAILED
    assert gpu5[-1] == "[yellow]warning[/]: remap-pending, xid-63"
    assert health.rows[0][4] == "0/0" and health.rows[0][-2:] == ["-", "-"]
    console = Console(width=300, record=True, file=io.StringIO(), force_terminal=True)
    console.print(health)
    assert "\x1b[1;31m79 ×1 (30s ago)" in console.export_text(styles=True)
