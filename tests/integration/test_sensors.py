"""GPU sensor readings through a real `plumb serve`: gauges on /metrics and the node's
`sensors` block, never history or findings, gone when the agent goes."""

from __future__ import annotations

import signal

from conftest import scrape, until


def _temperatures(aggregator, node: str) -> dict[str, float]:
    """GPU index -> temperature, as /metrics shows it for `node`."""
    return {
        labels["gpu"]: value
        for name, labels, value in scrape(aggregator)
        if name == "plumb_gpu_temperature_celsius" and labels["node"] == node
    }


def test_readings_are_gauges_without_history_or_findings_and_go_with_the_agent(
    aggregator, start_agent
):
    agent = start_agent(aggregator, "warm", "dgx-h100", "--sensor-interval", "0.2")
    until(lambda: len(_temperatures(aggregator, "warm")) == 8, what="8 GPU temperatures")
    findings = aggregator.json("/v1/drift", node="warm")

    # dgx-h100.yaml rests at 33 °C; make every read move within 33 +/- 4.
    agent.edit(lambda spec: spec.update(sensors={"temperature_jitter_c": 4}))
    seen: set[float] = set()
    until(
        lambda: len(seen.update(_temperatures(aggregator, "warm").values()) or seen) >= 3,
        what="temperatures moving",
    )
    assert all(29.0 <= t <= 37.0 for t in seen)

    samples = scrape(aggregator)
    (gpu3,) = [
        lb
        for n, lb, _ in samples
        if n == "plumb_gpu_power_draw_watts" and lb["node"] == "warm" and lb["gpu"] == "3"
    ]
    (info,) = [
        lb
        for n, lb, _ in samples
        if n == "plumb_gpu_info" and lb["node"] == "warm" and lb["gpu"] == "3"
    ]
    assert gpu3["UUID"] == info["uuid"] and gpu3["UUID"].startswith("GPU-")
    assert gpu3["model_name"] == "NVIDIA H100 80GB HBM3"
    assert gpu3["pci_bus_id"] == "00000000:42:00.0"  # FakeNvml: bus 0x18 + 0x0E * 3
    assert any(
        n == "plumb_node_sensors_timestamp_seconds" and lb == {"node": "warm"}
        for n, lb, _ in samples
    )

    detail = aggregator.json("/v1/nodes/warm")
    assert [g["index"] for g in detail["sensors"]["gpus"]] == list(range(8))
    assert detail["sensors"]["gpus"][0]["power_draw_watts"] == 60.0  # GpuSensorSpec's default
    assert "temperature_celsius" not in detail["facts"]["gpus"][0]
    # The profile edit changed no fact, so the node has no history; drift saw nothing new.
    assert aggregator.json("/v1/nodes/warm/history") == []
    assert aggregator.json("/v1/drift", node="warm") == findings

    agent.proc.send_signal(signal.SIGTERM)
    agent.proc.wait()
    until(lambda: not _temperatures(aggregator, "warm"), what="the gauges gone")
    assert aggregator.json("/v1/nodes/warm")["sensors"] is None
    assert not any(
        lb.get("node") == "warm"
        for n, lb, _ in scrape(aggregator)
        if n.startswith("plumb_gpu_") and n != "plumb_gpu_info"
    )
