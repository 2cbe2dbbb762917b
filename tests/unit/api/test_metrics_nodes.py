"""Per-node series: rendered per node as the intake touches it, so a scrape shows it as it is."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from plumb import facts as wire
from plumb.aggregator.metrics.nodes import NodeSeries
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.state.replicas import Membership

# What NodeSeries reads of the evaluator: no findings, no recipes yet.
NO_VERDICTS = SimpleNamespace(
    drift=SimpleNamespace(open_findings=lambda node=None: []), resolutions={}
)


def _facts(driver: str) -> dict[str, wire.Reading]:
    # GPU 0 of tests/data/real/qx-b200.xml
    return {
        "driver.driver_version": wire.Reading.ok(driver),
        "gpus[0].index": wire.Reading.ok(0),
        "gpus[0].name": wire.Reading.ok("NVIDIA B200"),
        "gpus[0].uuid": wire.Reading.ok("GPU-00000000-0000-0000-0000-000000000000"),
        "gpus[0].pci_bus_id": wire.Reading.ok("00000000:8F:00.0"),
    }


def _samples(series: NodeSeries) -> dict[tuple[str, tuple], float]:
    text = b"".join(series.render()).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _info(samples: dict, node: str) -> dict[str, str]:
    (labels,) = [
        dict(lb) for (n, lb) in samples if n == "plumb_node_info" and dict(lb)["node"] == node
    ]
    return labels


def test_a_scrape_follows_facts_connection_and_report_time():
    state = LiveState()
    node = state.restore("n1", _facts("570.1"))
    node.content_hash = wire.content_hash(node.facts)
    series = NodeSeries(state, NO_VERDICTS, Membership("r1", tailing=False))
    series.touched("n1")  # as the intake does after every change of the node
    first = _samples(series)
    assert _info(first, "n1")["driver_version"] == "570.1"
    assert first[("plumb_agent_connected", (("node", "n1"),))] == 0.0
    # dcgm-exporter's label names, so `on (UUID)` joins its series with these.
    gpu_labels = {
        "node": "n1",
        "gpu": "0",
        "UUID": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:8F:00.0",
        "model_name": "NVIDIA B200",
    }
    assert first[("plumb_gpu_info", tuple(sorted(gpu_labels.items())))] == 1.0
    assert first[("plumb_node_gpus", (("node", "n1"),))] == 1.0
    assert "gpu_count" not in _info(first, "n1")  # a count is a gauge, not a label

    node.facts = _facts("580.2")
    node.content_hash = wire.content_hash(node.facts)
    node.connected = True
    node.last_report_at = datetime(2026, 1, 1, tzinfo=UTC)
    state.restore("n2", _facts("570.1"))
    series.touched("n1")
    series.touched("n2")
    second = _samples(series)
    assert _info(second, "n1")["driver_version"] == "580.2"
    assert _info(second, "n2")["driver_version"] == "570.1"
    assert second[("plumb_agent_connected", (("node", "n1"),))] == 1.0
    stamp = ("plumb_node_last_report_timestamp_seconds", (("node", "n1"),))
    assert second[stamp] == node.last_report_at.timestamp()


def test_a_stream_opening_and_ending_moves_the_connected_line_and_keeps_the_rest():
    state = LiveState()
    node = state.restore("n1", _facts("570.1"))
    series = NodeSeries(state, NO_VERDICTS, Membership("r1", tailing=False))
    series.touched("n1")
    restored = _samples(series)
    connected = ("plumb_agent_connected", (("node", "n1"),))
    assert restored[connected] == 0.0

    # A resume after a restart: the same facts (the same dict), now on a stream.
    node.connected = True
    series.touched("n1")
    resumed = _samples(series)
    assert resumed[connected] == 1.0
    assert {k: v for k, v in resumed.items() if k != connected} == {
        k: v for k, v in restored.items() if k != connected
    }
    assert _info(resumed, "n1")["driver_version"] == "570.1"

    node.connected = False  # the stream ended
    series.touched("n1")
    assert _samples(series) == restored
