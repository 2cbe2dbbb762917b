"""Validated-stack labels and rollout gates on the real API server: a node that passes
validation is labelled with its stack until a stack fact changes, and a pool's gate opens once
its canary Node (labelled plumb.dev/canary=true) runs a new, validated stack, and closes on a
health finding on it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import BIN, Aggregator, scrape
from kubernetes import client

from .conftest import cluster_aggregators, node_labels, until

NAMESPACE = "plumb-gates"
FAST = {
    "PLUMB_KUBERNETES__LEASE_DURATION_S": "2",
    "PLUMB_KUBERNETES__RENEW_DEADLINE_S": "1.5",
    "PLUMB_KUBERNETES__RETRY_PERIOD_S": "0.2",
    "PLUMB_KUBERNETES__WRITE_INTERVAL_S": "0.2",
    "PLUMB_KUBERNETES__WRITE_NODES": "true",
}
# Node checks a healthy simulated H100 passes (tests/integration/test_validation.py).
CHECKS = ["gpu-count", "driver-nvml", "ecc", "xid"]
VALIDATED = "plumb.dev/validated-stack"
# The profile's driver is 580.173.02; another release of the same branch.
NEW_DRIVER = "580.95.05"


@pytest.fixture
def serve(tmp_path: Path, kubeconfig: Path, namespace: str) -> Iterator[Callable[..., Aggregator]]:
    """`plumb serve` writing Nodes on the test cluster as replica `name`, once it leads."""
    with cluster_aggregators(tmp_path, kubeconfig, namespace, FAST) as start:

        def lead(name: str) -> Aggregator:
            agg = start(name)
            until(lambda: agg.json("/readyz")["replica"]["leader"], what=f"{name} to lead")
            return agg

        yield lead


def validate(agg: Aggregator, *nodes: str) -> dict:
    """Run CHECKS on `nodes`; the finished run."""
    resp = agg.post("/v1/validations", json={"checks": CHECKS, "nodes": list(nodes)})
    assert resp.status_code == 202, resp.text
    run_id = resp.json()["id"]
    return until(
        lambda: (r := agg.json(f"/v1/validations/{run_id}"))["state"] == "finished" and r,
        timeout=30,
        what="the validation run",
    )


def connected(agg: Aggregator, *names: str) -> None:
    until(
        lambda: all((n := agg.node(name)) and n["connected"] for name in names),
        timeout=60,  # agent processes starting together on a busy machine
        what=f"{names} connected",
    )


def driver(agg: Aggregator, node: str) -> str:
    return agg.json(f"/v1/nodes/{node}")["facts"]["driver"]["driver_version"]["value"]


def labels(core: client.CoreV1Api, node: str) -> dict[str, str]:
    return node_labels(core.read_node(node))


def test_a_validated_node_carries_its_stack_until_a_stack_fact_changes(
    api, make_node, serve, start_agent
):
    core = client.CoreV1Api(api)
    make_node("vstack-gpu", {"nvidia.com/gpu.present": "true"})
    agg = serve("vstack")
    agent = start_agent(agg, "vstack-gpu", "dgx-h100")
    connected(agg, "vstack-gpu")
    until(lambda: labels(core, "vstack-gpu").get("plumb.dev/drift"), what="the leader's labels")
    assert VALIDATED not in labels(core, "vstack-gpu")  # never validated

    assert validate(agg, "vstack-gpu")["result"] == "passed"
    first = until(lambda: labels(core, "vstack-gpu").get(VALIDATED), what="the validated label")
    stack = agg.json("/v1/nodes/vstack-gpu")["stack_hash"]
    assert first == stack[:16]
    assert VALIDATED in owned_labels(core, "vstack-gpu")

    # A fact that is not part of the stack (a sysctl) changes: same stack, the label stays.
    agent.edit(lambda spec: spec["host"]["sysctl"].update({"vm.swappiness": "10"}))
    until(
        lambda: any(
            h["path"].startswith("host.sysctls") and (h["new"] or {}).get("value") == "10"
            for h in agg.json("/v1/nodes/vstack-gpu/history")
        ),
        what="the sysctl change in the history",
    )
    assert agg.json("/v1/nodes/vstack-gpu")["stack_hash"] == stack
    assert labels(core, "vstack-gpu").get(VALIDATED) == first

    # The driver changes: the label goes without waiting for any validation.
    agent.edit(lambda spec: spec["driver"].update(version=NEW_DRIVER))
    until(lambda: driver(agg, "vstack-gpu") == NEW_DRIVER, what="the new driver in the facts")
    until(lambda: VALIDATED not in labels(core, "vstack-gpu"), what="the label removed")
    assert labels(core, "vstack-gpu")["plumb.dev/gpu-health"] == "pass"  # the checks did pass

    # Validated at the new stack: labelled again, with the new stack's hash.
    assert validate(agg, "vstack-gpu")["result"] == "passed"
    second = until(lambda: labels(core, "vstack-gpu").get(VALIDATED), what="the new label")
    assert second != first


def owned_labels(core: client.CoreV1Api, node: str) -> set[str]:
    annotations = core.read_node(node).metadata.annotations or {}
    return set(json.loads(annotations.get("plumb.dev/owned-labels", "[]")))


def gate_metric(agg: Aggregator, pool: str) -> float | None:
    return next(
        (v for name, lab, v in scrape(agg) if name == "plumb_gate_open" and lab["pool"] == pool),
        None,
    )


def plumb_gate(agg: Aggregator, pool: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "plumb"), "gate", pool, "--server", agg.url],
        capture_output=True,
        text=True,
        env=agg.cli_env,
        timeout=30,
    )


def test_the_gate_opens_once_the_canary_runs_a_validated_new_stack_and_closes_on_a_fault(
    api, make_node, serve, start_agent
):
    names = ["gate-canary", "gate-1", "gate-2", "gate-3"]
    for name in names:
        make_node(name, {"nvidia.com/gpu.present": "true"})
    core = client.CoreV1Api(api)
    agg = serve("gates")
    agents = {n: start_agent(agg, n, "dgx-h100") for n in names}
    connected(agg, *names)
    pool = agg.node("gate-canary")["pool"]
    assert pool == "eks/h100/ubuntu/any/any"
    assert {agg.node(n)["pool"] for n in names} == {pool}

    # No canary yet: closed, and the metric says so.
    gate = agg.json(f"/v1/gates/{pool}")
    assert gate["state"] == "closed" and gate["nodes"] == 4
    assert gate["reasons"] == [
        "no canary nodes: label some of the pool's Nodes plumb.dev/canary=true"
    ]
    until(lambda: gate_metric(agg, pool) == 0.0, what="plumb_gate_open 0")

    core.patch_node("gate-canary", {"metadata": {"labels": {"plumb.dev/canary": "true"}}})
    gate = until(
        lambda: (g := agg.json(f"/v1/gates/{pool}"))["canaries"] and g, what="the canary seen"
    )
    assert [c["node"] for c in gate["canaries"]] == ["gate-canary"]
    assert gate["state"] == "closed"
    assert gate["reasons"][0].startswith("gate-canary: runs the stack ")
    assert gate["stack"] == gate["pool_stack"]

    # The canary takes a new driver: a new stack, not validated yet.
    agents["gate-canary"].edit(lambda spec: spec["driver"].update(version=NEW_DRIVER))
    until(lambda: driver(agg, "gate-canary") == NEW_DRIVER, what="the canary's new driver")
    gate = agg.json(f"/v1/gates/{pool}")
    assert gate["stack"] != gate["pool_stack"]
    assert gate["reasons"] == [f"gate-canary: not validated at its stack {gate['stack'][:16]}"]
    assert plumb_gate(agg, pool).returncode == 1

    # Validated at it: open, in the API, the metric and the CLI's exit code.
    assert validate(agg, "gate-canary")["result"] == "passed"
    gate = agg.json(f"/v1/gates/{pool}")
    assert (gate["state"], gate["reasons"]) == ("open", [])
    (canary,) = gate["canaries"]
    assert canary["validated_stack"] == canary["stack"] == gate["stack"]
    until(lambda: gate_metric(agg, pool) == 1.0, what="plumb_gate_open 1")
    cli = plumb_gate(agg, pool)
    assert cli.returncode == 0, cli.stderr
    assert f"gate {pool}: open" in cli.stdout
    until(
        lambda: labels(core, "gate-canary").get(VALIDATED) == gate["stack"][:16],
        what="the canary's validated-stack label",
    )

    # An XID 79 on the canary: it no longer matches its twins, so the gate closes.
    agents["gate-canary"].edit(
        lambda spec: spec.update(xids=[{"gpu": 3, "code": 79, "after_s": 0}])
    )
    gate = until(
        lambda: (g := agg.json(f"/v1/gates/{pool}"))["state"] == "closed" and g,
        what="the gate closed by the XID",
    )
    assert "gate-canary: open critical health finding gpu3/xid-79" in gate["reasons"]
    until(lambda: gate_metric(agg, pool) == 0.0, what="plumb_gate_open 0 again")
    cli = plumb_gate(agg, pool)
    assert cli.returncode == 1 and "gpu3/xid-79" in cli.stdout

    missing = agg.get("/v1/gates/eks/h100/rhel/any/any")
    assert missing.status_code == 404
    assert missing.json()["code"] == "not_found" and pool in missing.json()["hint"]
