"""The page as nodes change: each node's lines are re-rendered when the intake touches it, the
others' bytes stay as they were, and the page reads as if rendered whole.

Expected samples are written by hand from the facts below (GPU 0 of tests/data/real/qx-b200.xml)
and the family names and labels of docs/metrics (the names Prometheus rules and dashboards use).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from plumb import facts as wire
from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.metrics import nodes as nodes_module
from plumb.aggregator.metrics.nodes import NodeSeries
from plumb.aggregator.metrics.sensors import SensorSeries
from plumb.aggregator.state.live import LiveState, Sensors
from plumb.aggregator.state.replicas import Membership
from plumb.sensors import GpuSensors

AT = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)  # 1796126400 s after the epoch
B200 = {
    "driver.driver_version": wire.Reading.ok("580.95.05"),
    "gpus[0].index": wire.Reading.ok(0),
    "gpus[0].name": wire.Reading.ok("NVIDIA B200"),
    "gpus[0].uuid": wire.Reading.ok("GPU-00000000-0000-0000-0000-000000000000"),
    "gpus[0].pci_bus_id": wire.Reading.ok("00000000:8F:00.0"),
}
GPU0 = {
    "gpu": "0",
    "UUID": "GPU-00000000-0000-0000-0000-000000000000",
    "pci_bus_id": "00000000:8F:00.0",
    "model_name": "NVIDIA B200",
}
FINDING = DriftFinding(
    id="f1",
    node="b",
    kind="recipe",
    component="driver",
    expected=">= 580.65.06",
    observed="570.86.15",
    severity="critical",
    remediation="upgrade the driver",
    recipe_hash="0123456789ab",
    opened_at=AT,
)


class Verdicts:
    """What NodeSeries reads of the evaluator: open findings per node, no recipes."""

    def __init__(self) -> None:
        self.open: dict[str, list[DriftFinding]] = {}
        self.drift = SimpleNamespace(open_findings=lambda node: self.open.get(node, []))
        self.resolutions: dict = {}


def fleet():
    """Nodes `a` (connected, streaming readings) and `b` (restored, one critical finding)."""
    state, verdicts = LiveState(), Verdicts()
    a = state.node("a", AT)
    a.facts = a.reported = dict(B200)
    a.content_hash = wire.content_hash(a.facts)
    a.connected, a.last_report_at = True, AT
    a.sensors = Sensors(AT, (GpuSensors(0, temperature_celsius=41, power_draw_watts=120.5),))
    state.restore("b", {**B200, "driver.driver_version": wire.Reading.ok("570.86.15")})
    verdicts.open["b"] = [FINDING]
    membership = Membership("r1", tailing=False)
    nodes, sensors = NodeSeries(state, verdicts, membership), SensorSeries(state, membership)
    for name in ("a", "b"):
        nodes.touched(name)
        sensors.touched(name)
    return state, verdicts, nodes, sensors


def page(nodes: NodeSeries, sensors: SensorSeries | None = None) -> str:
    """/metrics' node families, then (where given) /metrics/sensors' page."""
    return b"".join([*nodes.render(), *(sensors.pieces() if sensors else ())]).decode()


def samples(text: str) -> dict[str, set[tuple[tuple, float]]]:
    """Each family's samples as (sorted labels, value), read by Prometheus' own parser."""
    return {
        f.name: {(tuple(sorted(s.labels.items())), s.value) for s in f.samples}
        for f in text_string_to_metric_families(text)
    }


def lb(**labels: str) -> tuple:
    return tuple(sorted(labels.items()))


def test_the_page_of_a_small_fleet_reads_as_written_by_hand():
    _, _, nodes, sensors = fleet()
    text = page(nodes, sensors)
    got = samples(text)
    stack = {"cuda_driver_version": "", "gpu_product": "NVIDIA B200", "kernel": "", "os": ""}
    assert got["plumb_node_info"] == {
        (lb(node="a", driver_version="580.95.05", **stack), 1.0),
        (lb(node="b", driver_version="570.86.15", **stack), 1.0),
    }
    assert got["plumb_node_gpus"] == {(lb(node="a"), 1.0), (lb(node="b"), 1.0)}
    assert got["plumb_agent_connected"] == {(lb(node="a"), 1.0), (lb(node="b"), 0.0)}
    assert got["plumb_gpu_info"] == {(lb(node="a", **GPU0), 1.0), (lb(node="b", **GPU0), 1.0)}
    assert got["plumb_node_findings"] == {
        (lb(node="a", severity="critical"), 0.0),
        (lb(node="a", severity="warning"), 0.0),
        (lb(node="a", severity="info"), 0.0),
        (lb(node="b", severity="critical"), 1.0),
        (lb(node="b", severity="warning"), 0.0),
        (lb(node="b", severity="info"), 0.0),
    }
    assert got["plumb_node_recipe_info"] == set()
    assert got["plumb_node_drift"] == {
        (lb(node="b", kind="recipe", component="driver", severity="critical"), 1.0)
    }
    # b was restored: it has no report time (the store had none) and no readings.
    assert got["plumb_node_last_report_timestamp_seconds"] == {(lb(node="a"), 1796126400.0)}
    # The readings carry node and gpu; plumb_gpu_info above joins the rest in.
    assert got["plumb_gpu_temperature_celsius"] == {(lb(node="a", gpu="0"), 41.0)}
    assert got["plumb_gpu_power_draw_watts"] == {(lb(node="a", gpu="0"), 120.5)}
    assert got["plumb_node_sensors_timestamp_seconds"] == {(lb(node="a"), 1796126400.0)}
    # One HELP and one TYPE per family, though its samples come from two nodes.
    for family in text_string_to_metric_families(text):
        name = f"{family.name}_total" if family.type == "counter" else family.name
        assert text.count(f"# HELP {name} ") == 1, name
        assert text.count(f"# TYPE {name} {family.type}\n") == 1, name


def test_a_change_re_renders_that_node_only():
    state, _, nodes, sensors = fleet()
    before_b = nodes._stack.get("b"), sensors._families.get("b")
    node = state.get("a")
    node.facts = node.reported = {**B200, "driver.driver_version": wire.Reading.ok("580.105.08")}
    node.content_hash = wire.content_hash(node.facts)
    node.sensors = Sensors(AT, (GpuSensors(0, temperature_celsius=44),))
    nodes.touched("a")
    sensors.touched("a")
    got = samples(page(nodes, sensors))
    info = {dict(labels)["node"]: dict(labels) for labels, _ in got["plumb_node_info"]}
    assert info["a"]["driver_version"] == "580.105.08"
    assert info["b"]["driver_version"] == "570.86.15"
    assert got["plumb_gpu_temperature_celsius"] == {(lb(node="a", gpu="0"), 44.0)}
    assert got["plumb_gpu_power_draw_watts"] == set()  # not in the new report
    # b's lines are the very bytes rendered before: nothing of it was formatted again.
    assert nodes._stack.get("b") is before_b[0]
    assert sensors._families.get("b") is before_b[1]


def test_new_facts_that_show_the_same_keep_the_lines_and_a_gpu_s_new_uuid_does_not(monkeypatch):
    state, _, nodes, _ = fleet()
    node = state.get("a")
    formatted: list[str] = []
    real = nodes_module._line
    monkeypatch.setattr(
        nodes_module, "_line", lambda name, *a: formatted.append(name) or real(name, *a)
    )
    # An ECC counter's delta: nothing /metrics shows of the node moved.
    node.facts = node.reported = {**B200, "gpus[0].ecc_uncorrected_aggregate": wire.Reading.ok(3)}
    nodes.touched("a")
    assert formatted == [], "the node's lines were formatted again"
    # The GPU was swapped: plumb_gpu_info shows its new UUID.
    new_uuid = "GPU-11111111-1111-1111-1111-111111111111"
    node.facts = node.reported = {**node.facts, "gpus[0].uuid": wire.Reading.ok(new_uuid)}
    nodes.touched("a")
    got = samples(page(nodes))
    assert got["plumb_gpu_info"] == {
        (lb(node="a", **{**GPU0, "UUID": new_uuid}), 1.0),
        (lb(node="b", **GPU0), 1.0),
    }
    # A stream's end after facts that show the same: the connected line follows.
    node.connected = False
    node.facts = {**node.facts}
    nodes.touched("a")
    assert (lb(node="a"), 0.0) in samples(page(nodes))["plumb_agent_connected"]


def test_a_heartbeat_re_renders_the_last_report_line_alone():
    state, _, nodes, sensors = fleet()
    stack_a, seen_b = nodes._stack.get("a"), nodes._seen.get("b")
    state.get("a").last_report_at = AT + timedelta(seconds=30)  # type: ignore[union-attr]
    nodes.seen("a")
    got = samples(page(nodes, sensors))
    assert got["plumb_node_last_report_timestamp_seconds"] == {(lb(node="a"), 1796126430.0)}
    assert nodes._stack.get("a") is stack_a  # the stack's lines were not formatted again
    # b has no report time and so no line: seen renders it as a touch would, nothing.
    nodes.seen("b")
    assert nodes._seen.get("b") is seen_b is None


def test_facts_the_cluster_adds_show_though_the_agent_s_hash_is_unchanged():
    state, _, nodes, sensors = fleet()
    node = state.get("a")
    # What Intake.cluster_facts does: the merged facts replace `facts`, `reported` and the
    # agent's content hash stay (the Node object gave the OS, the agent had none).
    node.facts = {**node.reported, "host.os_id": wire.Reading.ok("ubuntu")}
    nodes.touched("a")
    info = {
        dict(labels)["node"]: dict(labels) for labels, _ in samples(page(nodes))["plumb_node_info"]
    }
    assert info["a"]["os"] == "ubuntu"


def test_a_finding_closing_changes_the_counts_and_drops_its_series():
    _, verdicts, nodes, _ = fleet()
    verdicts.open["b"] = []
    nodes.touched("b")
    got = samples(page(nodes))
    assert got["plumb_node_drift"] == set()
    assert (lb(node="b", severity="critical"), 0.0) in got["plumb_node_findings"]


def test_a_removed_node_leaves_the_page_and_the_others_stay_as_they_were():
    state, _, nodes, sensors = fleet()
    before_b = nodes._stack.get("b")
    state.remove("a")
    nodes.touched("a")
    sensors.touched("a")
    text = page(nodes, sensors)
    assert 'node="a"' not in text
    assert nodes._stack.get("b") is before_b
    got = samples(text)
    assert got["plumb_agent_connected"] == {(lb(node="b"), 0.0)}
    assert got["plumb_gpu_temperature_celsius"] == set()  # the family, without samples
    assert "# TYPE plumb_gpu_temperature_celsius gauge\n" in text


def test_a_node_another_replica_exports_leaves_this_page_when_it_joins():
    state, _, _, _ = fleet()
    membership = Membership("r2", tailing=True)  # r2 alone: it exports every node
    for name in ("a", "b"):
        state.get(name).owner = "r1"  # streamed to r1, which is not alive yet
    nodes = NodeSeries(state, Verdicts(), membership)
    nodes.touched("a")
    nodes.touched("b")
    assert {dict(lbs)["node"] for lbs, _ in samples(page(nodes))["plumb_agent_connected"]} == {
        "a",
        "b",
    }
    membership.alive = frozenset({"r1", "r2"})  # r1 is back: its nodes are its own again
    assert samples(page(nodes))["plumb_agent_connected"] == set()
