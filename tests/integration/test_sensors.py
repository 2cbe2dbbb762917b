"""GPU sensor readings through a real `plumb serve`: gauges on /metrics/sensors and the node's
`sensors` block, never history or findings, gone when the agent goes."""

from __future__ import annotations

import signal

from conftest import scrape, until


def _temperatures(aggregator, node: str) -> dict[str, float]:
    """GPU index -> temperature, as /metrics/sensors shows it for `node`."""
    return {
        labels["gpu"]: value
        for name, labels, value in scrape(aggregator, "/metrics/sensors")
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

    samples = scrape(aggregator, "/metrics/sensors")
    (gpu3,) = [
        lb
        for n, lb, _ in samples
        if n == "plumb_gpu_power_draw_watts" and lb["node"] == "warm" and lb["gpu"] == "3"
    ]
    assert gpu3 == {"node": "warm", "gpu": "3"}  # the rest joins in from plumb_gpu_info
    stack = scrape(aggregator)
    (info,) = [
        lb
        for n, lb, _ in stack
        if n == "plumb_gpu_info" and lb["node"] == "warm" and lb["gpu"] == "3"
    ]
    assert info["UUID"].startswith("GPU-")
    assert info["model_name"] == "NVIDIA H100 80GB HBM3"
    assert info["pci_bus_id"] == "00000000:42:00.0"  # FakeNvml: bus 0x18 + 0x0E * 3
    # /metrics keeps the stack: no reading is on it.
    assert not [n for n, _, _ in stack if n.startswith("plumb_gpu_") and n != "plumb_gpu_info"]
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
    assert not any(lb.get("node") == "warm" for _, lb, _ in scrape(aggregator, "/metrics/sensors"))


HEALTH_SERIES = {
    "plumb_gpu_clock_event_active",
    "plumb_gpu_power_limit_watts",
    "plumb_gpu_pcie_replays_total",
    "plumb_gpu_ecc_corrected_volatile_total",
    "plumb_gpu_nvlink_crc_flit_errors_total",
}


def _gpu3(aggregator, node: str) -> dict[tuple[str, str], float]:
    """(series, reason) -> value of GPU 3's HEALTH_SERIES on `node`."""
    return {
        (name, labels.get("reason", "")): value
        for name, labels, value in scrape(aggregator, "/metrics/sensors")
        if name in HEALTH_SERIES and labels["node"] == node and labels["gpu"] == "3"
    }


def test_error_counters_and_clock_events_are_series_never_facts(aggregator, start_agent):
    agent = start_agent(aggregator, "sick", "dgx-h100", "--sensor-interval", "0.2")
    until(lambda: _gpu3(aggregator, "sick"), what="GPU 3's counters")
    findings = aggregator.json("/v1/drift", node="sick")
    at_rest = _gpu3(aggregator, "sick")
    # dgx-h100.yaml at rest: idle clocks, no errors; its 700 W limit beside the draw.
    assert at_rest[("plumb_gpu_clock_event_active", "gpu_idle")] == 1.0
    assert ("plumb_gpu_clock_event_active", "hw_power_brake_slowdown") not in at_rest
    assert at_rest[("plumb_gpu_pcie_replays_total", "")] == 0.0
    assert at_rest[("plumb_gpu_power_limit_watts", "")] == 700.0

    def sicken(spec):
        spec["gpus"].setdefault("overrides", {})[3] = {
            "pcie": {"replay_count": 174},
            "ecc": {"enabled": True, "corrected_volatile": 9},
            "nvlink": {"links_total": 18, "links_up": 18, "link_errors": {2: {"crc_flit": 40}}},
            "sensors": {"clock_event_reasons": ["hw_slowdown", "hw_power_brake_slowdown"]},
        }

    agent.edit(sicken)
    until(
        lambda: _gpu3(aggregator, "sick").get(("plumb_gpu_pcie_replays_total", "")) == 174.0,
        what="GPU 3's replays counted",
    )
    sick = _gpu3(aggregator, "sick")
    assert sick[("plumb_gpu_clock_event_active", "hw_power_brake_slowdown")] == 1.0
    assert sick[("plumb_gpu_clock_event_active", "hw_slowdown")] == 1.0
    assert ("plumb_gpu_clock_event_active", "gpu_idle") not in sick  # the reason ended
    assert sick[("plumb_gpu_ecc_corrected_volatile_total", "")] == 9.0
    assert sick[("plumb_gpu_nvlink_crc_flit_errors_total", "")] == 40.0
    gpu = aggregator.json("/v1/nodes/sick")["sensors"]["gpus"][3]
    assert gpu["clock_event_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert gpu["pcie_replay_count"] == 174
    # Readings, not facts: no history row, no finding (the alert rules judge them).
    assert aggregator.json("/v1/nodes/sick/history") == []
    assert aggregator.json("/v1/drift", node="sick") == findings
