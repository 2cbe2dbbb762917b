"""Opt-in cordons on the real API server: an XID 79 injected into a simulated node cordons its
Node when remediation is on and not when off, the circuit breaker holds back a node past its
pool's share, an operator's cordon is left alone, and `plumb uncordon` undoes Plumb's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import BIN, Aggregator, scrape
from kubernetes import client

from .conftest import cluster_aggregators, node_labels, until

NAMESPACE = "plumb-remediation"
FAST = {
    "PLUMB_KUBERNETES__LEASE_DURATION_S": "2",
    "PLUMB_KUBERNETES__RENEW_DEADLINE_S": "1.5",
    "PLUMB_KUBERNETES__RETRY_PERIOD_S": "0.2",
    "PLUMB_KUBERNETES__WRITE_INTERVAL_S": "0.2",
    # Labels too: the drift label shows the leader has acted on the finding.
    "PLUMB_KUBERNETES__WRITE_NODES": "true",
}
XID_79 = {"gpu": 3, "code": 79, "after_s": 0}


@pytest.fixture
def serve(tmp_path: Path, kubeconfig: Path, namespace: str) -> Iterator[Callable[..., Aggregator]]:
    """`plumb serve` on the test cluster as replica `name`, leading its own Lease."""
    with cluster_aggregators(tmp_path, kubeconfig, namespace, FAST) as start:

        def lead(name: str, **env: str) -> Aggregator:
            agg = start(name, **env)
            until(lambda: agg.json("/readyz")["replica"]["leader"], what=f"{name} to lead")
            return agg

        yield lead


def sicken(agg: Aggregator, agent) -> None:
    """Inject an XID 79 on GPU 3 of a running simulated node; return once its critical
    finding is open."""
    agent.edit(lambda spec: spec.update(xids=[XID_79]))
    until(
        lambda: any(
            f["component"] == "gpu3/xid-79" and f["severity"] == "critical"
            for f in agg.json("/v1/drift", node=agent.name)
        ),
        what=f"the XID 79 finding on {agent.name}",
    )


def reporting(agg: Aggregator, start_agent, *nodes: str) -> dict:
    """Simulated H100 nodes (one pool), once every one reports."""
    agents = {n: start_agent(agg, n, "dgx-h100") for n in nodes}
    until(lambda: all(agg.node(n) for n in nodes), what="every node reporting")
    return agents


def actions(agg: Aggregator) -> dict[str, float]:
    return {
        labels["action"]: value
        for name, labels, value in scrape(agg)
        if name == "plumb_remediation_actions_total"
    }


def annotations(node: client.V1Node) -> dict[str, str]:
    return node.metadata.annotations or {}


def uncordon(agg: Aggregator, node: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "plumb"), "uncordon", node, "--server", agg.url, "-o", "json"],
        capture_output=True,
        text=True,
        env=agg.cli_env,
        timeout=30,
    )


def test_with_cordons_off_a_node_with_a_critical_health_finding_stays_schedulable(
    api, make_node, serve, start_agent
):
    core = client.CoreV1Api(api)
    make_node("uncordoned-gpu")
    agg = serve("cordons-off")
    sicken(agg, reporting(agg, start_agent, "uncordoned-gpu")["uncordoned-gpu"])
    # The leader has written the finding's label: it acted on it, and cordoned nothing.
    node = until(
        lambda: (
            node_labels(n := core.read_node("uncordoned-gpu")).get("plumb.dev/drift") == "critical"
            and n
        ),
        what="the critical drift label",
    )
    assert not node.spec.unschedulable
    assert "plumb.dev/cordoned-by" not in annotations(node)
    assert actions(agg) == {"cordon": 0.0, "uncordon": 0.0, "blocked": 0.0}


def test_cordons_stop_at_the_pools_share_leave_operators_alone_and_plumb_uncordon_undoes(
    api, make_node, serve, start_agent
):
    core = client.CoreV1Api(api)
    for name in ("pool-a", "pool-b", "pool-ok", "pool-ops"):
        make_node(name)
    core.patch_node("pool-ops", {"spec": {"unschedulable": True}})  # an operator's cordon
    # Half of a pool of four: two unschedulable at most, and pool-ops is one already.
    agg = serve(
        "cordons-on",
        PLUMB_REMEDIATION__CORDON="true",
        PLUMB_REMEDIATION__MAX_CORDONED_FRACTION="0.5",
    )
    agents = reporting(agg, start_agent, "pool-a", "pool-b", "pool-ok", "pool-ops")
    sicken(agg, agents["pool-ops"])
    sicken(agg, agents["pool-a"])

    cordoned = until(
        lambda: (n := core.read_node("pool-a")).spec.unschedulable and n, what="pool-a cordoned"
    )
    mark = json.loads(annotations(cordoned)["plumb.dev/cordoned-by"])
    assert mark["findings"] == ["health gpu3/xid-79 (critical)"]
    assert mark["by"] == "cordons-on"
    assert mark["at"].endswith("Z")

    # pool-b falls sick too: 2 of 4 are unschedulable, a third would pass the share.
    sicken(agg, agents["pool-b"])
    until(lambda: actions(agg)["blocked"] == 1.0, what="the breaker to hold pool-b back")
    assert not core.read_node("pool-b").spec.unschedulable
    assert "cordon blocked by the circuit breaker" in agg.log()
    assert actions(agg)["cordon"] == 1.0
    # The operator's cordon is theirs: never marked, and never undone by Plumb.
    ops = core.read_node("pool-ops")
    assert ops.spec.unschedulable and "plumb.dev/cordoned-by" not in annotations(ops)
    refused = uncordon(agg, "pool-ops")
    assert refused.returncode == 8, refused
    assert "pool-ops was not cordoned by Plumb" in refused.stderr
    assert core.read_node("pool-ops").spec.unschedulable
    assert not core.read_node("pool-ok").spec.unschedulable

    done = uncordon(agg, "pool-a")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["node"], body["findings"], body["was_unschedulable"]) == (
        "pool-a",
        ["health gpu3/xid-79 (critical)"],
        True,
    )
    assert body["cordoned_at"] == mark["at"]
    node = core.read_node("pool-a")
    assert not node.spec.unschedulable
    assert "plumb.dev/cordoned-by" not in annotations(node)
    seen = json.loads(annotations(node)["plumb.dev/uncordoned-by"])
    assert seen["by"] == "test-admin"  # the admin token's name: who asked
    assert "node uncordoned" in agg.log()

    # The share has room again: pool-b is cordoned now, while pool-a, whose finding a person
    # has seen, stays schedulable (it comes first in name order, so it would go first).
    until(lambda: core.read_node("pool-b").spec.unschedulable, what="pool-b cordoned")
    assert not core.read_node("pool-a").spec.unschedulable
    assert actions(agg) == {"cordon": 2.0, "uncordon": 1.0, "blocked": 1.0}
