"""`plumb` as a user runs it: a subprocess against a real aggregator with simulated nodes."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

import yaml
from conftest import ADMIN_TOKEN, BIN, ENV, Aggregator, until
from timeouts import scaled


def plumb(aggregator: Aggregator, *args: str) -> subprocess.CompletedProcess:
    """`plumb ARGS` with stdout and stderr piped, as a script would run it."""
    return subprocess.run(
        [str(BIN / "plumb"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**ENV, "PLUMB_SERVER": aggregator.url, "COLUMNS": "200"},
    )


def drifted_fleet(aggregator: Aggregator, start_agent) -> None:
    start_agent(aggregator, "h100-a", "dgx-h100")
    drifting = start_agent(aggregator, "h100-b", "dgx-h100")
    start_agent(aggregator, "a100-a", "hgx-a100")
    until(lambda: len(aggregator.json("/v1/nodes")) == 3, what="three nodes")
    drifting.edit(lambda spec: spec["driver"].update(version="595.45.04"))
    until(lambda: aggregator.json("/v1/nodes", drifted="true"), what="a drifted node")


def test_nodes_node_and_drift_print_plain_text_when_piped(aggregator, start_agent) -> None:
    drifted_fleet(aggregator, start_agent)
    nodes = plumb(aggregator, "nodes")
    assert nodes.returncode == 0, nodes.stderr
    assert "\x1b" not in nodes.stdout
    lines = nodes.stdout.splitlines()
    assert lines[0] == "3 nodes: 0 down, 0 stale, 3 up; 1 drifted"
    assert lines[1].split() == [
        *("NODE", "STATUS", "POOL", "GPUS", "DRIVER", "CUDA", "FINDINGS", "REPORTED")
    ]
    (row,) = [line for line in lines if "h100-b" in line]
    assert "eks/h100/ubuntu/any/any" in row and "595.45.04" in row and "critical" in row
    assert row.split()[1] == "up" and "…" not in nodes.stdout

    drifted = json.loads(plumb(aggregator, "nodes", "--drifted", "-o", "json").stdout)
    assert [n["name"] for n in drifted] == ["h100-b"]
    pool = yaml.safe_load(
        plumb(aggregator, "nodes", "--pool", "gke/a100/cos/any/any", "-o", "yaml").stdout
    )
    assert [n["name"] for n in pool] == ["a100-a"]

    node = plumb(aggregator, "node", "h100-b")
    assert node.returncode == 0 and "\x1b" not in node.stdout
    # The driver moved without its fabric manager: that finding's fix is the critical one.
    assert "install and start nvidia-fabricmanager 595.45.04" in node.stdout
    assert "driver.driver_version" in node.stdout

    drift = plumb(aggregator, "drift")
    assert drift.returncode == 1 and "\x1b" not in drift.stdout


def test_a_stopped_agent_is_down_and_listed_first(aggregator, start_agent) -> None:
    start_agent(aggregator, "h100-a", "dgx-h100")
    stopping = start_agent(aggregator, "a100-z", "hgx-a100")
    until(lambda: len(aggregator.json("/v1/nodes")) == 2, what="two nodes")
    stopping.proc.terminate()
    stopping.proc.wait(timeout=10)
    until(lambda: not aggregator.node("a100-z")["connected"], what="a100-z disconnected")
    lines = plumb(aggregator, "nodes", "--server", aggregator.url).stdout.splitlines()
    assert lines[0].startswith("2 nodes: 1 down, 0 stale, 1 up")
    assert [line.split()[:2] for line in lines[2:]] == [["a100-z", "down"], ["h100-a", "up"]]


def test_baseline_accept_closes_the_baseline_findings(aggregator, start_agent) -> None:
    drifted_fleet(aggregator, start_agent)
    before = json.loads(plumb(aggregator, "drift", "--node", "h100-b", "-o", "json").stdout)
    assert "baseline" in {f["kind"] for f in before}
    # The admin token from a file given after the command, as a script would.
    token = aggregator.workdir / "admin-token"
    token.write_text(ADMIN_TOKEN + "\n")
    accepted = plumb(aggregator, "baseline", "accept", "h100-b", "--token-file", str(token))
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.startswith("accepted the baseline of node h100-b at ")
    after = json.loads(plumb(aggregator, "drift", "--node", "h100-b", "-o", "json").stdout)
    assert "baseline" not in {f["kind"] for f in after}
    history = plumb(aggregator, "drift", "--node", "h100-b", "--include-closed", "--since", "1h")
    closed = [line for line in history.stdout.splitlines() if " baseline " in line]
    assert closed and all(line.split()[-2] != "open" for line in closed), history.stdout
    assert history.stdout.splitlines()[0].endswith(f"{len(after)} open")


def test_bundle_refuses_a_used_folder_and_force_replaces_it(aggregator, tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "left-over.yaml").write_text("stale: true\n")
    args = ("bundle", "-o", str(folder), "--service", "eks", "--accelerator", "h100")
    refused = plumb(aggregator, *args)
    assert refused.returncode == 2 and "is not empty" in refused.stderr
    forced = plumb(aggregator, *args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert not (folder / "left-over.yaml").exists()
    checked = plumb(aggregator, "verify", str(folder))
    assert checked.returncode == 0 and checked.stdout.startswith("OK: "), checked.stderr


def test_exit_codes_scripts_can_use(aggregator, start_agent, tmp_path: Path) -> None:
    start_agent(aggregator, "h100-a", "dgx-h100")
    until(lambda: aggregator.node("h100-a"), what="the node")
    missing = plumb(aggregator, "node", "no-such-node")
    assert missing.returncode == 3 and "no node named" in missing.stderr
    bad = tmp_path / "c.yaml"
    bad.write_text("kind: RecipeCriteria\nspec: {service: nowhere}\n")
    assert plumb(aggregator, "recipe", "--criteria", str(bad)).returncode == 2
    down = subprocess.run(
        [str(BIN / "plumb"), "nodes", "--server", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert down.returncode == 5 and "cannot reach the aggregator" in down.stderr


def test_snapshot_writes_aicr_snapshots(aggregator, start_agent, tmp_path: Path) -> None:
    drifted_fleet(aggregator, start_agent)
    one = plumb(aggregator, "snapshot", "--format", "aicr", "--node", "h100-b")
    assert one.returncode == 0, one.stderr
    (doc,) = yaml.safe_load_all(one.stdout)
    assert doc["kind"] == "Snapshot" and doc["metadata"]["source-node"] == "h100-b"
    types = {
        m["type"]: {s["subtype"]: s["data"] for s in m["subtypes"]} for m in doc["measurements"]
    }
    assert types["GPU"]["smi"]["driver"] == "595.45.04"
    assert types["GPU"]["hardware"]["model"] == "h100"
    assert types["K8s"]["node"]["provider"] == "eks"
    assert types["NodeTopology"]["summary"]["node-count"] == 3

    every = list(yaml.safe_load_all(plumb(aggregator, "snapshot", "--format", "aicr").stdout))
    assert sorted(d["metadata"]["source-node"] for d in every) == ["a100-a", "h100-a", "h100-b"]
    as_json = json.loads(plumb(aggregator, "snapshot", "--format", "aicr", "-o", "json").stdout)
    assert len(as_json) == 3

    # Read back, Plumb's own AICR snapshot resolves as the node did.
    saved = tmp_path / "h100-b.yaml"
    saved.write_text(one.stdout)
    back = json.loads(plumb(aggregator, "recipe", "--snapshot", str(saved), "-o", "json").stdout)
    assert back["criteria"] == aggregator.json("/v1/nodes/h100-b/recipe")["criteria"]
    hostile = tmp_path / "laughs.yaml"
    hostile.write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"l{n}: &l{n} [{', '.join(['*' + ('a' if n == 1 else f'l{n - 1}')] * 10)}]\n"
                  for n in range(1, 9))
    )  # fmt: skip
    refused = plumb(aggregator, "recipe", "--snapshot", str(hostile))
    assert refused.returncode == 2 and "laughs.yaml" in refused.stderr

    plain = yaml.safe_load(plumb(aggregator, "snapshot", "--node", "h100-a").stdout)
    assert [n["name"] for n in plain["nodes"]] == ["h100-a"]
    assert plumb(aggregator, "snapshot", "--format", "aicr", "--node", "nope").returncode == 3


def test_recipe_criteria_file_resolves_like_the_flags(aggregator, tmp_path: Path) -> None:
    path = tmp_path / "criteria.yaml"
    path.write_text(
        "kind: RecipeCriteria\napiVersion: aicr.run/v1alpha2\nmetadata: {name: t}\n"
        "spec: {service: eks, accelerator: h100, os: ubuntu, intent: training}\n"
    )
    from_file = json.loads(plumb(aggregator, "recipe", "-c", str(path), "-o", "json").stdout)
    flags = plumb(
        aggregator,
        "recipe",
        "--service",
        "eks",
        "--accelerator",
        "h100",
        "--os",
        "ubuntu",
        "--intent",
        "training",
        "-o",
        "json",
    )
    assert from_file["content_hash"] == json.loads(flags.stdout)["content_hash"]


def test_watch_refreshes_then_stops(aggregator, start_agent) -> None:
    drifted_fleet(aggregator, start_agent)
    done = plumb(aggregator, "watch", "--interval", "0.1", "--iterations", "3")
    assert done.returncode == 0, done.stderr
    assert "plumb watch" in done.stdout and "h100-b" in done.stdout and "\x1b" not in done.stdout


def test_watch_in_a_terminal_redraws_until_ctrl_c(aggregator, start_agent) -> None:
    drifted_fleet(aggregator, start_agent)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "plumb"), "watch", "--interval", "0.2"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**ENV, "PLUMB_SERVER": aggregator.url, "COLUMNS": "160", "TERM": "xterm"},
        start_new_session=True,
    )
    os.close(follower)
    seen = b""

    def read_until(done, seconds: float) -> None:
        nonlocal seen
        deadline = time.monotonic() + scaled(seconds)
        while not done() and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.1)[0]:
                try:
                    seen += os.read(leader, 65536)
                except OSError:  # EIO: the last follower closed, the process is exiting
                    return

    try:
        read_until(lambda: seen.count(b"plumb watch") >= 2, 20)
        assert seen.count(b"plumb watch") >= 2, seen[-2000:]  # redrawn at least once
        assert b"\x1b[" in seen  # a terminal gets colours and cursor moves
        assert b"h100-b" in seen
        proc.send_signal(signal.SIGINT)
        # Keep reading: the last frame and the cursor restore must not block on a full pty.
        read_until(lambda: proc.poll() is not None, 10)
        assert proc.wait(timeout=scaled(5)) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
