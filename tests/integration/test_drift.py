"""Drift over real streams: findings open and close as simulated nodes change."""

from __future__ import annotations

import subprocess

from conftest import BIN, ENV, scrape, until

OUTSIDE_RECIPE = "595.45.04"  # another driver branch than the recipe's R580


def findings(aggregator, **params) -> list[dict]:
    return aggregator.json("/v1/drift", **params)


def keys(found: list[dict]) -> set[tuple[str, str, str, str]]:
    return {(f["node"], f["kind"], f["component"], f["severity"]) for f in found}


def start_pool(aggregator, start_agent, n: int = 3) -> list:
    agents = [start_agent(aggregator, f"h100-{i}", "dgx-h100") for i in range(n)]
    until(lambda: len(aggregator.json("/v1/nodes")) == n, what=f"{n} nodes")
    return agents


def test_a_fleet_that_matches_its_recipes_has_no_findings(aggregator, start_agent):
    start_pool(aggregator, start_agent)
    assert findings(aggregator) == []


def test_a_driver_upgrade_that_leaves_fabric_manager_behind_is_critical_until_restored(
    aggregator, start_agent
):
    # No GPU Operator here: the host image owns the driver, so a newer driver than the recipe
    # pins is no page by itself (recipes/drift.yaml). The NVSwitch node's fabric manager left
    # on the old version is: it refuses to start, and the GPUs cannot talk over NVLink.
    agents = start_pool(aggregator, start_agent)
    original = aggregator.node("h100-0")["driver_version"]
    agents[0].edit(lambda spec: spec["driver"].update(version=OUTSIDE_RECIPE))

    opened = until(
        lambda: (
            keys(findings(aggregator, node="h100-0"))
            >= {
                ("h100-0", "constraint", "fabric-manager", "critical"),
                ("h100-0", "baseline", "driver.driver_version", "warning"),
                ("h100-0", "pool", "driver", "warning"),
            }
            and findings(aggregator, node="h100-0")
        ),
        what="fabric manager, baseline and pool findings",
    )
    assert not [f for f in opened if f["kind"] == "recipe" and f["severity"] == "critical"]
    fabric = next(f for f in opened if f["component"] == "fabric-manager")
    assert original in fabric["observed"] and OUTSIDE_RECIPE in fabric["observed"]
    assert fabric["remediation"] and len(fabric["recipe_hash"]) == 64
    assert (
        "plumb_node_drift",
        {
            "node": "h100-0",
            "kind": "constraint",
            "component": "fabric-manager",
            "severity": "critical",
        },
        1.0,
    ) in scrape(aggregator)
    assert ("plumb_pool_driver_versions", {"pool": "eks/h100/ubuntu/any/any"}, 2.0) in scrape(
        aggregator
    )
    cli = subprocess.run(
        [str(BIN / "plumb"), "drift", "--server", aggregator.url],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "250"},
    )
    assert cli.returncode == 1, cli.stderr
    assert "h100-0" in cli.stdout and OUTSIDE_RECIPE in cli.stdout

    agents[0].edit(lambda spec: spec["driver"].update(version=original))
    until(lambda: findings(aggregator) == [], what="every finding to close")
    closed = findings(aggregator, include_closed="true", node="h100-0")
    assert {f["id"] for f in closed} >= {f["id"] for f in opened}
    assert all(f["closed_at"] for f in closed)
    samples = scrape(aggregator)
    assert not [s for s in samples if s[0] == "plumb_node_drift"]
    assert (
        "plumb_drift_transitions_total",
        {"kind": "constraint", "severity": "critical", "action": "closed"},
        1.0,
    ) in samples
    ok = subprocess.run(
        [str(BIN / "plumb"), "drift", "--server", aggregator.url],
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert ok.returncode == 0


def test_accepting_a_baseline_closes_baseline_findings(aggregator, start_agent):
    agent = start_agent(aggregator, "kernel-bump", "l4")
    until(lambda: aggregator.node("kernel-bump"), what="the node")
    agent.edit(lambda spec: spec["host"].update(kernel="6.8.0-1020-gke"))
    until(
        lambda: ("kernel-bump", "baseline", "host.kernel", "warning") in keys(findings(aggregator)),
        what="the baseline finding",
    )

    resp = aggregator.post("/v1/nodes/kernel-bump/baseline")
    assert resp.status_code == 200, resp.text
    assert resp.json()["facts"]["host.kernel"]["value"] == "6.8.0-1020-gke"
    assert findings(aggregator, kind="baseline") == []
    assert aggregator.post("/v1/nodes/ghost/baseline").status_code == 404


def test_gpu_health_findings_follow_the_readings(aggregator, start_agent):
    agent = start_agent(aggregator, "sick", "dgx-h100")
    until(lambda: aggregator.node("sick"), what="the node")
    agent.edit(
        lambda spec: (
            spec["gpus"]
            .setdefault("overrides", {})
            .update(
                {
                    3: {
                        "ecc": {"enabled": True, "uncorrected_volatile": 2},
                        "nvlink": {"links_total": 18, "links_up": 16},
                    }
                }
            )
        )
    )
    found = until(
        lambda: (
            {f["component"]: f for f in findings(aggregator, kind="health")}
            if len(findings(aggregator, kind="health")) == 2
            else None
        ),
        what="two health findings",
    )
    assert found["gpu3/ecc-uncorrected"]["severity"] == "critical"
    assert found["gpu3/ecc-uncorrected"]["observed"] == "2"
    # Fewer links than the node had at its baseline (18 of 18): a warning, not a page.
    assert found["gpu3/nvlink-down"]["expected"] == "18 (baseline)"
    assert found["gpu3/nvlink-down"]["severity"] == "warning"
    agent.edit(lambda spec: spec["gpus"].update(overrides={}))
    until(lambda: findings(aggregator, kind="health") == [], what="health findings to close")


def test_open_findings_survive_a_restart_with_their_timestamps(aggregator, start_agent):
    agent = start_agent(aggregator, "persistent", "dgx-h100")
    until(lambda: aggregator.node("persistent"), what="the node")
    agent.edit(lambda spec: spec["driver"].update(version=OUTSIDE_RECIPE))
    before = until(lambda: findings(aggregator, node="persistent"), what="findings")
    agent.proc.kill()  # the facts stay as last reported while the aggregator restarts
    agent.proc.wait()
    digest = aggregator.json("/v1/nodes/persistent")["content_hash"]
    assert aggregator.stop() == 0
    aggregator.start()  # ready once the restored nodes are hashed and evaluated
    assert aggregator.json("/readyz")["checks"]["restored"] is True
    assert aggregator.json("/v1/nodes/persistent")["content_hash"] == digest != ""
    after = findings(aggregator, node="persistent")
    assert {(f["id"], f["opened_at"]) for f in after} == {(f["id"], f["opened_at"]) for f in before}


def test_filters_and_unknown_nodes(aggregator, start_agent):
    start_pool(aggregator, start_agent)
    assert aggregator.get("/v1/nodes/ghost/drift").status_code == 404
    assert aggregator.get("/v1/drift", severity="fatal").status_code == 400
    assert aggregator.json("/v1/nodes/h100-1/drift") == []
