"""`plumb diff A B`: the stack facts that differ, from hand-written snapshots (data/diff/) whose
differences are known, and from live nodes answered by a fake aggregator.

before.yaml → after.yaml changes exactly: driver.driver_version and driver.cuda_driver_version
(modified), driver.fabric_manager_version (removed), gpus[0].persistence_mode and
host.kubelet_version (added). The GPU temperature differs too and is a reading: never shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run

import plumb.aggregator.cli.diff as diff_cli

DATA = Path(__file__).parent / "data" / "diff"
BEFORE, AFTER = str(DATA / "before.yaml"), str(DATA / "after.yaml")


def _ok(value):
    return {"status": "ok", "value": value}


def test_the_table_lists_each_changed_fact_with_both_readings():
    lines = run("diff", BEFORE, AFTER).splitlines()
    assert lines[0] == f"5 facts differ from {BEFORE} to {AFTER}"
    assert [line.split() for line in lines[1:]] == [
        ["NODE", "FACT", "A", "B"],
        ["gpu-node-1", "driver.cuda_driver_version", "12.8", "13.0"],
        ["gpu-node-1", "driver.driver_version", "570.133.20", "580.105.08"],
        ["gpu-node-1", "driver.fabric_manager_version", "not_supported", "-"],
        ["gpu-node-1", "gpus[0].persistence_mode", "-", "yes"],
        ["gpu-node-1", "host.kubelet_version", "-", "v1.32.4"],
    ]


def test_json_gives_each_change_its_kind_and_readings():
    body = json.loads(run("diff", BEFORE, AFTER, "-o", "json"))
    assert body["summary"] == {"added": 2, "removed": 1, "modified": 2}
    by_path = {c["path"]: c for c in body["changes"]}
    assert by_path["driver.driver_version"] == {
        "node": "gpu-node-1",
        "path": "driver.driver_version",
        "kind": "modified",
        "a": _ok("570.133.20"),
        "b": _ok("580.105.08"),
    }
    assert by_path["driver.fabric_manager_version"]["kind"] == "removed"
    assert by_path["driver.fabric_manager_version"]["a"] == {"status": "not_supported"}
    assert by_path["host.kubelet_version"]["kind"] == "added"
    assert by_path["host.kubelet_version"]["a"] is None


def test_fail_on_drift_exits_1_when_facts_differ_and_0_when_none_do():
    run("diff", BEFORE, AFTER, "--fail-on-drift", code=1)
    same = run("diff", BEFORE, BEFORE, "--fail-on-drift")
    assert "no stack fact differs" in same
    assert "FACT" not in same  # no column header over an empty table
    run("diff", BEFORE, AFTER)  # without the flag a difference is no failure


def test_sensor_readings_are_never_compared():
    # hot.json is before.yaml as a node detail, 47 °C warmer, with a sensors block.
    out = run("diff", BEFORE, str(DATA / "hot.json"), "--fail-on-drift", "-o", "json")
    assert json.loads(out)["changes"] == []


def test_aicr_snapshots_pair_nodes_by_name_and_name_the_ones_on_one_side():
    body = json.loads(
        run("diff", str(DATA / "aicr-before.yaml"), str(DATA / "aicr-after.yaml"), "-o", "json")
    )
    assert [(c["node"], c["path"], c["kind"]) for c in body["changes"]] == [
        ("gpu-node-1", "GPU.smi.cuda-version", "modified"),
        ("gpu-node-1", "GPU.smi.driver", "modified"),
        ("gpu-node-1", "GPU.smi.gpu-count", "modified"),
        ("gpu-node-2", "(node)", "removed"),
        ("gpu-node-3", "(node)", "added"),
    ]
    assert body["changes"][2]["a"] == _ok(8) and body["changes"][2]["b"] == _ok(7)


class LiveNodes:
    """The aggregator's /v1/snapshot?node=NAME, from hand-written nodes."""

    def __init__(self, nodes: dict[str, dict]) -> None:
        self.nodes = nodes
        self.asked: list[tuple[str, dict]] = []

    def __call__(self, server: str, path: str, *, params=None, **_):
        self.asked.append((path, dict(params or {})))
        return {"nodes": [{"name": params["node"], "facts": self.nodes[params["node"]]}]}


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> LiveNodes:
    fake = LiveNodes(
        {
            "gpu-a": {"driver": {"driver_version": _ok("580.105.08")}},
            "gpu-b": {"driver": {"driver_version": _ok("570.133.20")}},
        }
    )
    monkeypatch.setattr(diff_cli, "api_json", fake)
    return fake


def test_two_live_nodes_are_compared_whatever_their_names(live):
    body = json.loads(run("diff", "node:gpu-a", "node:gpu-b", "-o", "json"))
    assert live.asked == [("/v1/snapshot", {"node": "gpu-a"}), ("/v1/snapshot", {"node": "gpu-b"})]
    ((change),) = body["changes"]
    assert change["node"] == "gpu-a → gpu-b" and change["path"] == "driver.driver_version"
    assert (change["a"]["value"], change["b"]["value"]) == ("580.105.08", "570.133.20")


def test_a_snapshot_against_a_live_node(live):
    body = json.loads(run("diff", BEFORE, "node:gpu-a", "-o", "json"))
    paths = [c["path"] for c in body["changes"]]
    assert "driver.driver_version" in paths and "host.kernel" in paths


def test_a_file_that_is_no_snapshot_exits_2_and_says_what_a_side_is(tmp_path):
    bad = tmp_path / "notes.yaml"
    bad.write_text("just: a mapping\n")
    run("diff", str(bad), BEFORE, code=2)
    run("diff", str(tmp_path / "missing.yaml"), BEFORE, code=2)
