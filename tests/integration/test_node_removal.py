"""Nodes can leave: `plumb node rm` (DELETE /v1/nodes/{name}) for one whose agent is gone,
and expiry for nodes silent longer than nodes.expire_after_s. Issue "Trust nothing", row 3:
before, nothing could ever remove a node, so any registered name stayed forever."""

from __future__ import annotations

import subprocess

from conftest import BIN, READ_TOKEN, Aggregator, stop, until

from plumb.aggregator.store import Store


def test_a_node_whose_agent_is_gone_is_removed_with_its_history(aggregator, start_agent):
    agent = start_agent(aggregator, "retired", "l4")
    until(lambda: (aggregator.node("retired") or {}).get("connected"), what="retired up")
    agent.edit(lambda spec: spec["host"].update(kernel="6.8.0-1020-gke"))  # some history
    until(lambda: aggregator.json("/v1/nodes/retired/history"), what="a change in its history")

    refused = subprocess.run(
        [str(BIN / "plumb"), "node", "rm", "retired", "--server", aggregator.url],
        capture_output=True,
        text=True,
        env=aggregator.cli_env,
    )
    assert refused.returncode == 8, refused.stderr  # conflict: its agent still streams
    assert "stop its agent" in refused.stderr

    stop(agent.proc)
    until(lambda: not aggregator.node("retired")["connected"], what="retired down")
    reader = aggregator.delete("/v1/nodes/retired", token=READ_TOKEN)
    assert reader.status_code == 403 and reader.json()["code"] == "forbidden"

    removed = subprocess.run(
        [str(BIN / "plumb"), "node", "rm", "retired", "--server", aggregator.url],
        capture_output=True,
        text=True,
        env=aggregator.cli_env,
    )
    assert removed.returncode == 0, removed.stderr
    assert aggregator.node("retired") is None
    gone = aggregator.get("/v1/nodes/retired/history")
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"

    aggregator.stop()
    store = Store(aggregator.db)
    try:  # nodes.keep_history (the default): what it ran stays in the database
        assert {h.path for h in store.history("retired", limit=1000)} >= {"host.kernel"}
    finally:
        store.close()
    restarted = Aggregator(aggregator.workdir, grpc=aggregator.grpc, http_port=aggregator.http_port)
    restarted.start()
    try:
        assert restarted.node("retired") is None  # a restart does not bring it back
    finally:
        restarted.stop()


def test_a_node_silent_past_the_expiry_is_removed_on_its_own(tmp_path, start_agent):
    agg = Aggregator(
        tmp_path,
        extra_env={"PLUMB_NODES__EXPIRE_AFTER_S": "1", "PLUMB_NODES__EXPIRE_CHECK_S": "0.2"},
    ).start()
    try:
        agent = start_agent(agg, "short-lived", "l4")
        until(lambda: (agg.node("short-lived") or {}).get("connected"), what="node up")
        stop(agent.proc)
        until(lambda: agg.node("short-lived") is None, what="the silent node to expire")
        assert "node removed" in agg.log()
    finally:
        agg.stop()
