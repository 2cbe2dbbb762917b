"""What a person scripting `plumb` relies on: node status, global options anywhere, enum values
checked before any request, baselines, closed drift, bundle folders, plurals, watch outages.

Expected output is written by hand from the canned API answers (tests/unit/cli/data/api.json,
as in test_cli_output.py) and the rules the docstrings state.
"""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import API, NOW, FakeApi, run
from rich.console import Console
from typer.testing import CliRunner

import plumb.aggregator.cli.render as render
from plumb.aggregator.cli import app, choices
from plumb.aggregator.cli.app import hoist_globals
from plumb.aggregator.cli.drift import since_time


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _node(name: str, **changes) -> dict:
    row = copy.deepcopy(API["/v1/nodes"][0])
    row.update(name=name, **changes)
    return row


# --- status, sorting, counts, plurals ----------------------------------------------------------


def test_a_connected_node_silent_past_90_s_is_stale_and_counted(api: FakeApi) -> None:
    api.answers["/v1/nodes"] = [
        _node("quiet", last_report_at="2026-07-01T02:58:29Z"),  # 91 s before NOW
        _node("fresh", last_report_at="2026-07-01T02:58:31Z"),  # 89 s
        _node("gone", connected=False),
    ]
    assert run("nodes").splitlines()[:5] == [
        "3 nodes: 1 down, 1 stale, 1 up; 0 drifted",
        "NODE    STATUS   POOL                      GPUS                 DRIVER       CUDA   "
        "FINDINGS   REPORTED",
        "gone    down     eks/h100/ubuntu/any/any   8 × H100 80GB HBM3   580.173.02   13.0   "
        "-          10s ago",
        "quiet   stale    eks/h100/ubuntu/any/any   8 × H100 80GB HBM3   580.173.02   13.0   "
        "-          91s ago",
        "fresh   up       eks/h100/ubuntu/any/any   8 × H100 80GB HBM3   580.173.02   13.0   "
        "-          89s ago",
    ]


def test_stale_follows_the_aggregators_agent_stale_default() -> None:
    from plumb.aggregator.settings import KubernetesSettings

    assert KubernetesSettings().agent_stale_s == render.STALE_AFTER_S


def test_one_node_and_one_gpu_are_singular(api: FakeApi) -> None:
    api.answers["/v1/nodes"] = [_node("solo", gpu_count=1)]
    assert run("nodes").splitlines()[0] == "1 node: 0 down, 0 stale, 1 up; 0 drifted"
    assert "1 × H100 80GB HBM3" in run("nodes")
    detail = copy.deepcopy(API["/v1/nodes/node-b"])
    detail["facts"]["gpus"] = detail["facts"]["gpus"][:1]
    api.answers["/v1/nodes/node-b"] = detail
    api.answers["/v1/nodes/node-b/history"] = API["/v1/nodes/node-b/history"][:1]
    api.answers["/v1/nodes/node-b/drift"] = API["/v1/nodes/node-b/drift"][:1]
    lines = run("node", "node-b").splitlines()
    assert "1 GPU" in lines and "1 open drift finding" in lines
    assert "1 recent change, newest first" in lines


def test_a_terminal_80_columns_wide_wraps_cells_and_never_cuts_a_version(api: FakeApi) -> None:
    console = Console(width=80, force_terminal=True, color_system=None, file=io.StringIO())
    with console.capture() as captured:
        console.print(render.fleet_table(API["/v1/nodes"]))
    text = captured.get()
    assert "…" not in text
    for version in ("580.173.02", "595.45.04", "13.0"):
        assert version in text
    assert all(len(line) <= 80 for line in text.splitlines())


# --- global options before or after the command ------------------------------------------------


def test_hoisting_moves_global_options_and_values_before_the_command() -> None:
    args = ["node", "rm", "x", "--server", "http://a", "--token-file=t", "-o", "json"]
    assert hoist_globals(args) == [
        "--server",
        "http://a",
        "--token-file=t",
        "node",
        "rm",
        "x",
        "-o",
        "json",
    ]
    assert hoist_globals(["nccl", "--", "--server", "f"]) == ["nccl", "--", "--server", "f"]


@pytest.mark.parametrize(
    "args",
    [
        ("--server", "http://far:1", "--token-file", "{tok}", "nodes"),
        ("nodes", "--server", "http://far:1", "--token-file", "{tok}"),
        ("--token-file", "{tok}", "nodes", "--server=http://far:1"),
    ],
)
def test_server_and_token_file_work_before_or_after_the_command(
    api: FakeApi, tmp_path: Path, args: tuple[str, ...]
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    run(*(a.format(tok=token) for a in args))
    assert api.servers == ["http://far:1"]
    assert api.headers == [{"Authorization": "Bearer s3cret"}]


def test_plumb_server_env_is_the_default_and_a_flag_beats_it(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUMB_SERVER", "http://env:2")
    run("nodes")
    run("nodes", "--server", "http://flag:3")
    assert api.servers == ["http://env:2", "http://flag:3"]


# --- enum options are checked here, with the valid values --------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("drift", "--severity", "high"),
            "unknown severity 'high'; valid: critical, warning, info",
        ),
        (
            ("drift", "--kind", "stack"),
            "unknown kind 'stack'; valid: recipe, constraint, baseline, pool, health",
        ),
        (
            ("validate", "--phase", "smoke"),
            "unknown phase 'smoke'; valid: deployment, conformance, performance",
        ),
        (
            ("bundle", "-o", "out", "--deployer", "kustomize"),
            "unknown deployer 'kustomize'; valid: argocd, argocd-helm, flux, helm, helmfile",
        ),
        (
            ("recipe", "--service", "ecs"),
            "unknown service 'ecs'; valid: any, aks, eks, gke, kind, ocp, oke, on-prem",
        ),
        (("recipe", "--os", "windows"), "valid: any, amazonlinux, cos, ol, rhel, talos, ubuntu"),
        (("recipe", "--intent", "gaming"), "valid: any, inference, training"),
        (("nodes", "-o", "xml"), "'xml' is not one of 'table', 'wide', 'yaml', 'json'"),
    ],
)
def test_a_bad_enum_value_is_refused_before_any_request(
    api: FakeApi, args: tuple[str, ...], said: str
) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert said in " ".join(result.stderr.replace("│", " ").split())
    assert "/docs" not in result.stderr
    assert api.calls == []


def test_a_known_value_passes(api: FakeApi) -> None:
    run("drift", "--severity", "warning", "--kind", "baseline", code=1)  # node-b's critical
    run("recipe", "--accelerator", "h100", "--os", "ubuntu", "-o", "json")
    assert api.calls[0] == ("/v1/drift", {"severity": "warning", "kind": "baseline"})
    assert api.calls[1][1]["accelerator"] == "h100"


def test_the_cli_reads_the_criteria_values_the_catalog_allows() -> None:
    from plumb.aggregator.recipes import load_catalog

    allowed = load_catalog().allowed_values()
    assert {key: choices.criteria(key)() for key in allowed} == allowed


# --- baseline accept ---------------------------------------------------------------------------


def test_baseline_accept_posts_and_says_what_was_accepted(api: FakeApi) -> None:
    api.answers["/v1/nodes/node-b/baseline"] = {
        "node": "node-b",
        "accepted_at": "2026-07-01T03:00:00Z",
        "gpu_count": 1,
        "facts": {"driver.driver_version": {"status": "ok", "value": "595.45.04"}},
    }
    assert run("baseline", "accept", "node-b", "--token-file", "/dev/null") == (
        "accepted the baseline of node node-b at 2026-07-01 03:00:00 UTC: 1 fact, 1 GPU\n"
    )
    assert api.calls == [("/v1/nodes/node-b/baseline", {})]


def test_the_baseline_remediation_names_the_command() -> None:
    from plumb.aggregator.recipes import load_catalog

    text = (Path(load_catalog().root) / "drift.yaml").read_text()
    assert "plumb baseline accept {node}" in text and "POST /v1/nodes" not in text


# --- drift history -----------------------------------------------------------------------------


def test_since_takes_a_duration_or_an_iso_time() -> None:
    assert since_time("90s", NOW) == NOW - timedelta(seconds=90)
    assert since_time("6h", NOW) == NOW - timedelta(hours=6)
    assert since_time("2d", NOW) == NOW - timedelta(days=2)
    assert since_time("2026-06-30T12:00:00") == datetime(2026, 6, 30, 12, tzinfo=UTC)
    assert since_time("2026-06-30T12:00:00+02:00") == datetime(2026, 6, 30, 10, tzinfo=UTC)


def test_drift_bad_since_names_both_forms(api: FakeApi) -> None:
    result = invoke("drift", "--since", "yesterday")
    assert result.exit_code == 2 and "neither a duration" in result.stderr
    assert api.calls == []


def test_drift_include_closed_and_since_go_to_the_server_and_show_closed(api: FakeApi) -> None:
    by_component = {f["component"]: f for f in API["/v1/drift"]}
    closed = copy.deepcopy(by_component["driver"])
    closed.update(closed_at="2026-07-01T02:59:00Z")
    older = copy.deepcopy(by_component["driver.driver_version"])
    older.update(opened_at="2026-06-29T08:15:00Z", closed_at="2026-06-30T09:00:00Z")
    api.answers["/v1/drift"] = [closed, older]
    text = run("drift", "--include-closed", "--since", "2026-06-28T00:00:00Z")  # none open: 0
    assert api.calls == [
        ("/v1/drift", {"include_closed": "true", "since": "2026-06-28T00:00:00+00:00"})
    ]
    fix1, fix2 = closed["remediation"], older["remediation"]
    assert text.splitlines() == [
        "2 drift findings, 0 open",
        "NODE     SEVERITY   KIND       COMPONENT               EXPECTED → OBSERVED      "
        "SINCE              CLOSED             FIX",
        "node-b   critical   recipe     driver                  580.173.02 → 595.45.04   "
        "02:58:12           02:59:00           [1]",
        "node-b   warning    baseline   driver.driver_version   580.173.02 → 595.45.04   "
        "2026-06-29 08:15   2026-06-30 09:00   [2]",
        f"[1] {fix1}",
        f"[2] {fix2}",
    ]


# --- bundle folders ----------------------------------------------------------------------------


def test_bundle_refuses_a_non_empty_folder_before_asking(tmp_path: Path) -> None:
    (tmp_path / "stale.yaml").write_text("old: true\n")
    result = invoke("bundle", "-o", str(tmp_path), "--server", "http://127.0.0.1:9")
    assert result.exit_code == 2
    assert f"{tmp_path} is not empty" in result.stderr and "--force" in result.stderr
    assert (tmp_path / "stale.yaml").exists()


# --- watch -------------------------------------------------------------------------------------


def test_watch_shows_an_unreachable_server_as_an_error_not_an_empty_fleet() -> None:
    result = invoke("watch", "--server", "http://127.0.0.1:9", "--iterations", "1")
    assert result.exit_code == 5
    lines = result.stdout.splitlines()
    assert lines[1].startswith("ERROR cannot reach the aggregator: ")
    assert lines[2] == "last answer: never; retrying, the view is not current"
    assert "0 nodes" not in result.stdout and "drift finding" not in result.stdout


def test_watch_frame_after_an_outage_says_when_it_last_answered(api: FakeApi) -> None:
    frame = render.watch_view("http://p", [], [], "the aggregator answered 503: db down", NOW)
    assert frame[1:] == [
        "[bold red]ERROR[/] the aggregator answered 503: db down",
        "last answer: 03:00:00 UTC; retrying, the view is not current",
    ]


# --- node rm -----------------------------------------------------------------------------------


def test_node_rm_says_which_node_went(api: FakeApi) -> None:
    api.answers["/v1/nodes/gone"] = None
    assert run("node", "rm", "gone") == "removed node gone\n"
    assert api.calls == [("/v1/nodes/gone", {})]


def test_json_output_of_drift_is_the_api_document(api: FakeApi) -> None:
    assert json.loads(run("drift", "-o", "json", code=1)) == API["/v1/drift"]
