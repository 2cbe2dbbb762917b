"""The fleet's change timeline over real streams: a rollout on part of a pool is one event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conftest import until

SYSTEM_NCCL = "/usr/lib/x86_64-linux-gnu/libnccl.so.2"


def test_an_nccl_rollout_on_two_of_three_nodes_is_one_event(aggregator, start_agent):
    agents = [start_agent(aggregator, f"h100-{i}", "dgx-h100") for i in range(3)]
    until(lambda: len(aggregator.json("/v1/nodes")) == 3, what="three nodes")
    pool = aggregator.node("h100-0")["pool"]
    for agent in agents[:2]:
        agent.edit(lambda spec: spec["nccl"].update({SYSTEM_NCCL: "2.28.3"}))

    def rollout() -> list[dict]:
        return [e for e in aggregator.json("/v1/changes", fact="nccl") if e["new"] == "2.28.3"]

    (event,) = until(
        lambda: (found := rollout()) and found[0]["nodes"] == ["h100-0", "h100-1"] and found,
        what="one NCCL event naming both nodes",
    )
    # The profile's system library moved from 2.27.7 (dgx-h100.yaml) on 2 of the pool's 3.
    assert (event["fact"], event["old"], event["pool"], event["pool_nodes"]) == (
        "nccl.libraries[*].version",
        "2.27.7",
        pool,
        3,
    )
    assert event["summary"].startswith(
        f"nccl.libraries[*].version 2.27.7 → 2.28.3 on 2 of 3 nodes of {pool}, "
    )

    # The same events as Grafana annotations, and a window before them holds none.
    (note,) = [
        n
        for n in aggregator.json("/v1/changes", fact="nccl", format="annotations")
        if n["title"] == event["summary"]
    ]
    assert note["text"] == "h100-0, h100-1" and "plumb" in note["tags"]
    started = datetime.fromisoformat(event["started_at"])
    assert note["time"] == int(started.timestamp() * 1000)
    earlier = {
        "since": (started - timedelta(hours=2)).isoformat(),
        "until": (started - timedelta(hours=1)).isoformat(),
    }
    assert aggregator.json("/v1/changes", **earlier) == []


def test_a_window_that_ends_before_it_starts_is_refused(aggregator):
    now = datetime.now(UTC)
    resp = aggregator.get(
        "/v1/changes", since=now.isoformat(), until=(now - timedelta(hours=1)).isoformat()
    )
    assert resp.status_code == 400
    assert resp.json()["code"] == "invalid_input" and "since" in resp.json()["message"]
