"""Real agents stream simulated nodes to a real aggregator; what users see over HTTP."""

from __future__ import annotations

import signal
import subprocess

from conftest import BIN, ENV, free_port, scrape, until


def test_simulated_nodes_appear_with_their_stack(aggregator, start_agent):
    start_agent(aggregator, "h100-a", "dgx-h100")
    start_agent(aggregator, "consumer", "rtx-4090")
    until(lambda: len(aggregator.json("/v1/nodes")) == 2, what="two nodes")
    h100 = aggregator.node("h100-a")
    assert h100["connected"] is True
    assert h100["gpu_count"] == 8
    assert h100["gpu_product"] == "NVIDIA H100 80GB HBM3"
    assert h100["driver_version"] and h100["cuda_driver_version"]

    detail = aggregator.json("/v1/nodes/consumer")
    gpu = detail["facts"]["gpus"][0]
    assert gpu["serial"] == {"status": "not_supported", "value": None}
    assert gpu["ecc_mode_current"]["status"] == "not_supported"
    assert gpu["uuid"]["status"] == "ok" and gpu["uuid"]["value"].startswith("GPU-")


def test_a_profile_edit_reaches_history_and_metrics(aggregator, start_agent):
    agent = start_agent(aggregator, "upgrading", "dgx-h100")
    until(lambda: aggregator.node("upgrading"), what="the node")
    old = aggregator.node("upgrading")["driver_version"]

    agent.edit(lambda spec: spec["driver"].update(version="570.124.06"))

    until(
        lambda: aggregator.node("upgrading")["driver_version"] == "570.124.06",
        what="the new driver version",
    )
    history = until(
        lambda: [
            c
            for c in aggregator.json("/v1/nodes/upgrading/history")
            if c["path"] == "driver.driver_version"
        ],
        what="the driver change in history",
    )
    assert history[0]["old"]["value"] == old
    assert history[0]["new"]["value"] == "570.124.06"
    samples = scrape(aggregator)
    (info,) = [lb for n, lb, _ in samples if n == "plumb_node_info" and lb["node"] == "upgrading"]
    assert info["driver_version"] == "570.124.06"
    assert info["gpu_product"] == "NVIDIA H100 80GB HBM3"
    assert ("plumb_node_gpus", {"node": "upgrading"}, 8.0) in samples
    assert ("plumb_agent_connected", {"node": "upgrading"}, 1.0) in samples
    gpus = [lb for n, lb, _ in samples if n == "plumb_gpu_info" and lb["node"] == "upgrading"]
    assert sorted(int(g["gpu"]) for g in gpus) == list(range(8))
    assert all(g["UUID"].startswith("GPU-") and g["pci_bus_id"] for g in gpus)
    assert any(
        n == "plumb_ingest_messages_total" and lb == {"type": "delta"} and v >= 1
        for n, lb, v in samples
    )
    # The delta above was acked: the time to its Ack is counted.
    assert any(
        n == "plumb_ingest_reply_seconds_count" and lb == {"type": "delta"} and v >= 1
        for n, lb, v in samples
    )


def test_history_is_newest_first_and_honours_limit(aggregator, start_agent):
    agent = start_agent(aggregator, "limits", "dgx-h100")
    until(lambda: aggregator.node("limits"), what="the node")

    def limits() -> list[float]:
        """New values of GPU 0's power limit changes after the first report, newest first."""
        history = aggregator.json("/v1/nodes/limits/history", limit=1000)
        return [
            c["new"]["value"]
            for c in history
            if c["path"] == "gpus[0].power_limit_watts" and c["old"] is not None
        ]

    for watts in (600.0, 650.0, 690.0):
        agent.edit(lambda spec, w=watts: spec["gpus"]["template"].update(power_limit_watts=w))
        until(lambda w=watts: limits()[:1] == [w], what=f"power limit {watts} in history")
    assert limits() == [690.0, 650.0, 600.0]
    latest = aggregator.json("/v1/nodes/limits/history", limit=1)
    assert len(latest) == 1
    assert latest[0]["new"]["value"] == 690.0


def test_killed_agent_shows_disconnected(aggregator, start_agent):
    agent = start_agent(aggregator, "doomed", "l4")
    until(lambda: (aggregator.node("doomed") or {}).get("connected"), what="connected")
    agent.proc.send_signal(signal.SIGKILL)
    agent.proc.wait()
    until(lambda: aggregator.node("doomed")["connected"] is False, what="disconnected")
    assert ("plumb_agent_connected", {"node": "doomed"}, 0.0) in scrape(aggregator)


def test_aggregator_restart_keeps_history_and_agents_reconnect(aggregator, start_agent):
    agent = start_agent(aggregator, "survivor", "hgx-a100")
    until(lambda: aggregator.node("survivor"), what="the node")
    agent.edit(lambda spec: spec["driver"].update(version="570.124.06"))
    until(lambda: aggregator.json("/v1/nodes/survivor/history"), what="a history entry")

    assert aggregator.stop() == 0
    aggregator.start()
    restored = aggregator.node("survivor")
    assert restored["driver_version"] == "570.124.06"
    history = aggregator.json("/v1/nodes/survivor/history")
    assert [c["path"] for c in history].count("driver.driver_version") == 1
    until(lambda: aggregator.node("survivor")["connected"], timeout=30, what="reconnection")
    # The agent's Hello named the facts it last sent, which the restarted aggregator holds:
    # the stream resumed, no FullFacts came, and no change rows were added.
    samples = scrape(aggregator)
    assert ("plumb_ingest_streams_resumed_total", {}, 1.0) in samples
    received = {labels["type"]: v for n, labels, v in samples if n == "plumb_ingest_messages_total"}
    assert received.get("hello") == 1.0 and received.get("full_facts", 0.0) == 0.0
    assert aggregator.json("/v1/nodes/survivor/history") == history


def test_snapshot_as_json_and_yaml(aggregator, start_agent):
    start_agent(aggregator, "snap", "l40s")
    until(lambda: aggregator.node("snap"), what="the node")
    body = aggregator.json("/v1/snapshot")
    assert [n["name"] for n in body["nodes"]] == ["snap"]
    assert body["nodes"][0]["facts"]["driver"]["driver_version"]["status"] == "ok"
    yaml_text = aggregator.get("/v1/snapshot", format="yaml").text
    assert "name: snap" in yaml_text


def test_unknown_node_is_a_404_with_a_json_error(aggregator):
    resp = aggregator.get("/v1/nodes/ghost")
    assert resp.status_code == 404
    assert resp.json()["code"] == "not_found"
    assert "ghost" in resp.json()["message"]
    assert aggregator.get("/v1/nodes/ghost/history").status_code == 404


def test_a_second_serve_on_a_taken_agent_port_stops_with_a_hint(aggregator, tmp_path):
    """gRPC would share the port (SO_REUSEPORT) and quietly take half the agents."""
    serve = subprocess.run(
        [str(BIN / "plumb"), "serve", "--grpc-listen", aggregator.grpc,
         "--http-listen", f"127.0.0.1:{free_port()}",
         "--db", f"sqlite:///{tmp_path / 'second.db'}"],
        env=ENV, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert serve.returncode == 5, serve.stderr
    said = " ".join(serve.stderr.split())
    assert f"cannot listen for agents on {aggregator.grpc}" in said
    assert "hint:" in said
    assert aggregator.get("/readyz").status_code == 200  # the first one is untouched
