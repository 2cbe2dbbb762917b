"""The shipped alert rules in a real Prometheus, scraping a real aggregator fed by simulated
agents. `for:` is 0s in the copy Prometheus loads (see prom_fixture), so each alert fires on the
first evaluation after the condition shows on /metrics."""

from __future__ import annotations

import signal

from conftest import until
from prom_fixture import Prometheus

# A driver outside every shipped recipe for the dgx-h100 profile (which runs 580.173.02): the
# drift engine reports it as a critical `recipe` finding on component `driver`.
OFF_RECIPE_DRIVER = "595.45.04"
# Prometheus' first scrape comes ~5 s after start; give every Prometheus-side wait room.
PROM_WAIT = 30.0


def connected_in_prometheus(prom: Prometheus, node: str) -> bool:
    return bool(prom.query(f'plumb_agent_connected{{node="{node}"}} == 1'))


def rules_have_seen(prom: Prometheus, agents: int) -> None:
    """Wait until a rule evaluation (not just a scrape) has seen `agents` connected agents, so
    that "no alert" assertions after it are not vacuous."""
    until(
        lambda: prom.query(f"fleet:plumb_agents_connected:sum == {agents}"),
        timeout=PROM_WAIT,
        what=f"the rules to evaluate with {agents} connected agents",
    )


def test_agent_down_fires_when_an_agent_dies(aggregator, start_agent, prometheus):
    doomed = start_agent(aggregator, "doomed", "dgx-h100")
    start_agent(aggregator, "steady", "dgx-h100")
    for node in ("doomed", "steady"):
        until(
            lambda node=node: connected_in_prometheus(prometheus, node),
            timeout=PROM_WAIT,
            what=f"plumb_agent_connected{{node={node!r}}} == 1 in Prometheus",
        )
    rules_have_seen(prometheus, 2)
    assert not prometheus.alerts("PlumbAgentDown", state="firing")

    doomed.proc.send_signal(signal.SIGKILL)
    doomed.proc.wait()

    (alert,) = until(
        lambda: prometheus.alerts("PlumbAgentDown", node="doomed"),
        timeout=PROM_WAIT,
        what="PlumbAgentDown firing for node doomed",
    )
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["runbook_url"].endswith("docs/runbooks.md#plumbagentdown")
    assert "doomed" in alert["annotations"]["summary"]
    assert not prometheus.alerts("PlumbAgentDown", node="steady")


def test_stack_drift_fires_for_the_drifted_node_and_resolves(aggregator, start_agent, prometheus):
    drifter = start_agent(aggregator, "drifter", "dgx-h100")
    start_agent(aggregator, "steady", "dgx-h100")
    original = until(
        lambda: (aggregator.node("drifter") or {}).get("driver_version"), what="drifter's driver"
    )
    until(lambda: aggregator.node("steady"), what="node steady")
    for node in ("drifter", "steady"):
        until(
            lambda node=node: connected_in_prometheus(prometheus, node),
            timeout=PROM_WAIT,
            what=f"node {node} in Prometheus",
        )
    rules_have_seen(prometheus, 2)
    # Both nodes run their recipe: nothing critical is open.
    assert not prometheus.alerts("PlumbStackDrift")

    drifter.edit(lambda spec: spec["driver"].update(version=OFF_RECIPE_DRIVER))

    firing = until(
        lambda: prometheus.alerts("PlumbStackDrift", node="drifter"),
        timeout=PROM_WAIT,
        what="PlumbStackDrift firing for node drifter",
    )
    # A newer driver alone pages nobody; the fabric manager it left behind does.
    fabric = [a for a in firing if a["labels"].get("component") == "fabric-manager"]
    assert fabric, firing
    assert fabric[0]["labels"]["kind"] == "constraint"
    assert fabric[0]["labels"]["severity"] == "critical"
    assert fabric[0]["annotations"]["runbook_url"].endswith("docs/runbooks.md#plumbstackdrift")
    assert not [a for a in firing if a["labels"].get("kind") == "recipe"]
    assert not prometheus.alerts("PlumbStackDrift", node="steady")
    # drifter and steady resolve to the same pool, which now runs two driver versions.
    (mixed,) = until(
        lambda: prometheus.alerts("PlumbMixedDriverVersions"),
        timeout=PROM_WAIT,
        what="PlumbMixedDriverVersions firing",
    )
    assert mixed["annotations"]["summary"].endswith("runs 2 different driver versions")

    drifter.edit(lambda spec: spec["driver"].update(version=original))

    until(
        lambda: not prometheus.alerts("PlumbStackDrift", node="drifter"),
        timeout=PROM_WAIT,
        what="PlumbStackDrift for node drifter to resolve",
    )
    assert not prometheus.alerts("PlumbStackDrift", state="pending", node="drifter")
    until(
        lambda: not prometheus.alerts("PlumbMixedDriverVersions"),
        timeout=PROM_WAIT,
        what="PlumbMixedDriverVersions to resolve",
    )


def test_gpu_health_fires_critical_for_an_xid_79_and_pages_once(
    aggregator, start_agent, prometheus
):
    sick = start_agent(aggregator, "off-the-bus", "dgx-h100")
    start_agent(aggregator, "steady", "dgx-h100")
    for node in ("off-the-bus", "steady"):
        until(
            lambda node=node: connected_in_prometheus(prometheus, node),
            timeout=PROM_WAIT,
            what=f"node {node} in Prometheus",
        )
    rules_have_seen(prometheus, 2)
    assert not prometheus.alerts("PlumbGpuHealth")

    # The profile schedules XID 79 ("GPU has fallen off the bus") on GPU 3 one second after
    # the node started, which is past: the fake NVML delivers it at once.
    sick.edit(lambda spec: spec.update(xids=[{"gpu": 3, "code": 79, "after_s": 1}]))

    finding = until(
        lambda: next(
            (
                f
                for f in aggregator.json("/v1/drift", node="off-the-bus")
                if f["component"] == "gpu3/xid-79"
            ),
            None,
        ),
        what="the XID 79 finding",
    )
    assert (finding["kind"], finding["severity"]) == ("health", "critical")
    (alert,) = until(
        lambda: prometheus.alerts("PlumbGpuHealth", node="off-the-bus"),
        timeout=PROM_WAIT,
        what="PlumbGpuHealth firing for node off-the-bus",
    )
    assert alert["labels"]["component"] == "gpu3/xid-79"
    assert alert["labels"]["kind"] == "health"
    assert alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["summary"] == "GPU health problem on off-the-bus: gpu3/xid-79"
    assert alert["annotations"]["runbook_url"].endswith("docs/runbooks.md#plumbgpuhealth")
    # One broken GPU pages once: the stack-drift alerts leave health findings to this one.
    assert not prometheus.alerts("PlumbStackDrift", node="off-the-bus")
    assert not prometheus.alerts("PlumbGpuHealth", node="steady")


def test_gpu_sensor_alerts_fire_on_a_power_brake_and_an_nvlink_recovery(
    aggregator, start_agent, prometheus
):
    braked = start_agent(aggregator, "braked", "dgx-h100", "--sensor-interval", "0.2")
    until(
        lambda: prometheus.query('plumb_gpu_clock_event_active{node="braked"}'),
        timeout=PROM_WAIT,
        what="braked's clock events in Prometheus",
    )
    rules_have_seen(prometheus, 1)
    # At rest (dgx-h100.yaml: idle, no errors) nothing fires.
    assert not prometheus.alerts("PlumbGpuClocksSlowedDown")
    assert not prometheus.alerts("PlumbGpuNvlinkErrors")

    braked.edit(
        lambda spec: (
            spec["gpus"]
            .setdefault("overrides", {})
            .update(
                {
                    3: {
                        "sensors": {"clock_event_reasons": ["hw_power_brake_slowdown"]},
                        "nvlink": {
                            "links_total": 18,
                            "links_up": 18,
                            "link_errors": {4: {"recovery": 1}},
                        },
                    }
                }
            )
        )
    )
    (slowed,) = until(
        lambda: prometheus.alerts("PlumbGpuClocksSlowedDown", node="braked"),
        timeout=PROM_WAIT,
        what="PlumbGpuClocksSlowedDown firing for braked's GPU 3",
    )
    assert slowed["labels"]["gpu"] == "3"
    assert slowed["labels"]["reason"] == "hw_power_brake_slowdown"
    assert slowed["labels"]["UUID"].startswith("GPU-")  # joins dcgm-exporter's series
    (nvlink,) = until(
        lambda: prometheus.alerts("PlumbGpuNvlinkErrors", node="braked"),
        timeout=PROM_WAIT,
        what="PlumbGpuNvlinkErrors firing for braked's GPU 3",
    )
    assert nvlink["labels"]["gpu"] == "3"
    assert nvlink["annotations"]["runbook_url"].endswith("#plumbgpunvlinkerrors")
