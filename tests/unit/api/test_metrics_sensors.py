"""Sensor gauges: each GPU's latest readings labelled `node` and `gpu`, gone with the stream."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from prometheus_client.parser import text_string_to_metric_families

from plumb import facts as wire
from plumb.aggregator.metrics.sensors import FAMILIES, SensorSeries
from plumb.aggregator.state.live import LiveState, Sensors
from plumb.aggregator.state.replicas import Membership
from plumb.sensors import GpuSensors

FACTS = {
    "gpus[0].index": wire.Reading.ok(0),
    "gpus[0].uuid": wire.Reading.ok("GPU-6d0c0f7e-3f1b-4d47-9c43-4d6b4f0d2a11"),
    "gpus[0].name": wire.Reading.ok("NVIDIA H100 80GB HBM3"),
    "gpus[0].pci_bus_id": wire.Reading.ok("00000000:18:00.0"),
    "gpus[0].power_limit_watts": wire.Reading.ok(700.0),
}
AT = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)  # 1796126400 s after the epoch
# Labels sorted by name, as prometheus_client writes them; UUID and the model join in
# from plumb_gpu_info on /metrics.
LABELS = 'gpu="0",node="n1"'


def _text(series: SensorSeries) -> str:
    return b"".join(series.pieces()).decode()


def _render(state: LiveState) -> str:
    """The page of a fresh SensorSeries that the intake told of node n1."""
    series = SensorSeries(state, Membership("r1", tailing=False))
    series.touched("n1")
    return _text(series)


def test_each_reading_is_a_gauge_labelled_with_its_node_and_gpu():
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = FACTS
    node.sensors = Sensors(
        AT,
        (
            GpuSensors(
                index=0,
                temperature_celsius=41,
                power_draw_watts=71.25,
                sm_clock_mhz=1980,
                gpu_utilization_ratio=0.35,
                memory_used_bytes=536_870_912,
            ),
        ),
    )
    text = _render(state)
    # Memory clock, memory utilisation, clock events and the error counters were not read:
    # no sample, only the family.
    assert text == (
        "# HELP plumb_gpu_temperature_celsius GPU temperature.\n"
        "# TYPE plumb_gpu_temperature_celsius gauge\n"
        f"plumb_gpu_temperature_celsius{{{LABELS}}} 41.0\n"
        "# HELP plumb_gpu_power_draw_watts GPU power draw.\n"
        "# TYPE plumb_gpu_power_draw_watts gauge\n"
        f"plumb_gpu_power_draw_watts{{{LABELS}}} 71.25\n"
        "# HELP plumb_gpu_power_limit_watts GPU power management limit (a fact, beside the "
        "draw for draw / limit).\n"
        "# TYPE plumb_gpu_power_limit_watts gauge\n"
        f"plumb_gpu_power_limit_watts{{{LABELS}}} 700.0\n"
        "# HELP plumb_gpu_sm_clock_mhz Current SM clock of the GPU.\n"
        "# TYPE plumb_gpu_sm_clock_mhz gauge\n"
        f"plumb_gpu_sm_clock_mhz{{{LABELS}}} 1980.0\n"
        "# HELP plumb_gpu_memory_clock_mhz Current memory clock of the GPU.\n"
        "# TYPE plumb_gpu_memory_clock_mhz gauge\n"
        "# HELP plumb_gpu_utilization_ratio Share of the last sample period a kernel ran on "
        "the GPU.\n"
        "# TYPE plumb_gpu_utilization_ratio gauge\n"
        f"plumb_gpu_utilization_ratio{{{LABELS}}} 0.35\n"
        "# HELP plumb_gpu_memory_utilization_ratio Share of the last sample period the GPU's "
        "memory was read or written.\n"
        "# TYPE plumb_gpu_memory_utilization_ratio gauge\n"
        "# HELP plumb_gpu_memory_used_bytes GPU memory in use.\n"
        "# TYPE plumb_gpu_memory_used_bytes gauge\n"
        f"plumb_gpu_memory_used_bytes{{{LABELS}}} 5.36870912e+08\n"
        + "".join(
            f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"
            for name, doc, kind in (
                (
                    "plumb_gpu_clock_event_active",
                    "1 while this reason holds the GPU's clocks below their maximum (NVML "
                    "clock events); no series while it does not.",
                    "gauge",
                ),
                (
                    "plumb_gpu_ecc_corrected_volatile_total",
                    "Corrected (single-bit) ECC errors since the driver loaded.",
                    "counter",
                ),
                (
                    "plumb_gpu_ecc_corrected_aggregate_total",
                    "Corrected (single-bit) ECC errors over the GPU's life.",
                    "counter",
                ),
                (
                    "plumb_gpu_pcie_replays_total",
                    "PCIe replays (retransmissions) of the GPU's link.",
                    "counter",
                ),
                (
                    "plumb_gpu_nvlink_replay_errors_total",
                    "NVLink data-link replay errors, summed over the GPU's links.",
                    "counter",
                ),
                (
                    "plumb_gpu_nvlink_recovery_errors_total",
                    "NVLink data-link recovery errors, summed over the GPU's links.",
                    "counter",
                ),
                (
                    "plumb_gpu_nvlink_crc_flit_errors_total",
                    "NVLink data-link CRC flit errors, summed over the GPU's links.",
                    "counter",
                ),
            )
        )
        + "# HELP plumb_node_sensors_timestamp_seconds When the aggregator received the node's "
        "latest sensor readings.\n"
        "# TYPE plumb_node_sensors_timestamp_seconds gauge\n"
        'plumb_node_sensors_timestamp_seconds{node="n1"} 1.7961264e+09\n'
    )
    assert list(text_string_to_metric_families(text))  # and Prometheus' parser reads it


def test_a_new_report_shows_at_once_and_a_gone_one_drops_its_series():
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = FACTS
    node.sensors = Sensors(AT, (GpuSensors(0, temperature_celsius=41),))
    series = SensorSeries(state, Membership("r1", tailing=False))
    series.touched("n1")  # as the intake does with every report
    assert f"plumb_gpu_temperature_celsius{{{LABELS}}} 41.0\n" in _text(series)
    node.sensors = Sensors(AT, (GpuSensors(0, temperature_celsius=42),))
    series.touched("n1")
    assert f"plumb_gpu_temperature_celsius{{{LABELS}}} 42.0\n" in _text(series)
    node.sensors = None  # the stream ended (Intake.disconnected)
    series.touched("n1")
    assert "{" not in _text(series)


def test_clock_events_are_a_gauge_per_active_reason_and_counters_are_totals():
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = FACTS
    node.sensors = Sensors(
        AT,
        (
            GpuSensors(
                index=0,
                clock_event_reasons=0x4 | 0x80 | 0x400,  # SwPowerCap, HwPowerBrake, a newer bit
                pcie_replay_count=150,
                ecc_corrected_aggregate=3400,
                nvlink_crc_flit_errors=7,
            ),
        ),
    )
    text = _render(state)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    active = {s.labels["reason"]: s.value for s in families["plumb_gpu_clock_event_active"].samples}
    # 0x400 is no reason Plumb exports; of the seven it does, only the two set have a series.
    assert active == {"sw_power_cap": 1.0, "hw_power_brake_slowdown": 1.0}
    assert f'plumb_gpu_clock_event_active{{{LABELS},reason="sw_power_cap"}} 1.0\n' in text
    assert f"plumb_gpu_pcie_replays_total{{{LABELS}}} 150.0\n" in text
    assert f"plumb_gpu_ecc_corrected_aggregate_total{{{LABELS}}} 3400.0\n" in text
    assert f"plumb_gpu_nvlink_crc_flit_errors_total{{{LABELS}}} 7.0\n" in text
    assert families["plumb_gpu_pcie_replays"].type == "counter"  # the parser drops _total
    assert [s.value for s in families["plumb_gpu_pcie_replays"].samples] == [150.0]


def test_a_reason_that_ends_takes_its_series_with_it():
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = FACTS
    node.sensors = Sensors(AT, (GpuSensors(0, clock_event_reasons=0x8 | 0x40),))
    series = SensorSeries(state, Membership("r1", tailing=False))
    series.touched("n1")
    text = _text(series)
    assert f'plumb_gpu_clock_event_active{{{LABELS},reason="hw_slowdown"}} 1.0\n' in text
    assert f'plumb_gpu_clock_event_active{{{LABELS},reason="hw_thermal_slowdown"}} 1.0\n' in text
    node.sensors = Sensors(AT, (GpuSensors(0, clock_event_reasons=0x8),))  # cooled down
    series.touched("n1")
    text = _text(series)
    assert f'plumb_gpu_clock_event_active{{{LABELS},reason="hw_slowdown"}} 1.0\n' in text
    assert "hw_thermal_slowdown" not in text
    # Full clocks (mask 0) and a GPU that cannot say (None) alike: no clock-event series.
    for mask in (0, None):
        node.sensors = Sensors(AT, (GpuSensors(0, clock_event_reasons=mask),))
        series.touched("n1")
        assert "plumb_gpu_clock_event_active{" not in _text(series)


def test_a_report_formats_only_the_families_whose_readings_moved():
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = {**FACTS, "gpus[1].index": wire.Reading.ok(1)}
    node.sensors = Sensors(
        AT, (GpuSensors(0, temperature_celsius=41, sm_clock_mhz=1980), GpuSensors(1, 40))
    )
    series = SensorSeries(state, Membership("r1", tailing=False))
    series.touched("n1")
    before = list(series._nodes["n1"].blocks)
    node.sensors = Sensors(
        AT, (GpuSensors(0, temperature_celsius=42, sm_clock_mhz=1980), GpuSensors(1, 40))
    )
    series.touched("n1")
    after = series._nodes["n1"].blocks
    moved = [k for k, (b, a) in enumerate(zip(before, after, strict=True)) if a is not b]
    assert [FAMILIES[k][0] for k in moved] == ["plumb_gpu_temperature_celsius"]
    text = _text(series)
    assert 'plumb_gpu_sm_clock_mhz{gpu="0",node="n1"} 1980.0\n' in text
    assert 'plumb_gpu_temperature_celsius{gpu="0",node="n1"} 42.0\n' in text
    assert 'plumb_gpu_temperature_celsius{gpu="1",node="n1"} 40.0\n' in text
    # GPU 1 has no power limit among the facts: no sample, rather than a made-up one.
    assert 'plumb_gpu_power_limit_watts{gpu="1"' not in text


def test_lines_kept_report_by_report_read_as_a_fresh_render_of_the_last():
    """Only moved readings are formatted again and only their families joined again; the
    page must still be what rendering the latest report afresh gives, whatever moved, came
    or left in between."""
    rng = random.Random(7)
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = {**FACTS, **{f"gpus[{i}].index": wire.Reading.ok(i) for i in (1, 2, 3)}}
    kept = SensorSeries(state, Membership("r1", tailing=False))
    gpus = {i: GpuSensors(i, 40, 300.0, 1980, 2619, 0.5, 0.25, 1 << 30, 0x1) for i in range(4)}
    present = [0, 1, 2, 3]
    for step in range(400):
        i, field = rng.randrange(4), rng.choice(GpuSensors._fields[1:])
        gpus[i] = gpus[i]._replace(**{field: rng.choice([None, 0, 1, 7, 0x8 | 0x40])})
        if step % 20 == 0:  # GPUs come and go (a reset, a GPU off the bus)
            present = sorted(rng.sample(range(4), rng.randint(0, 4)))
        node.sensors = Sensors(AT + timedelta(seconds=step), tuple(gpus[k] for k in present))
        kept.touched("n1")
        assert _text(kept) == _render(state), f"step {step}"


def test_values_read_as_prometheus_client_writes_them():
    # Go's %g as floatToGoString writes it: Python's repr below a million, exponents from it.
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = FACTS
    cases = {  # memory used (bytes) -> its text
        0: "0.0",
        999_999: "999999.0",
        1_000_000: "1e+06",
        536_870_912: "5.36870912e+08",
        85_899_345_920: "8.589934592e+10",
    }
    series = SensorSeries(state, Membership("r1", tailing=False))
    for used, text in cases.items():
        node.sensors = Sensors(AT, (GpuSensors(0, memory_used_bytes=used),))
        series.touched("n1")
        assert f"plumb_gpu_memory_used_bytes{{{LABELS}}} {text}\n" in _text(series), used
    node.sensors = Sensors(AT, (GpuSensors(0, power_draw_watts=0.125, gpu_utilization_ratio=1.0),))
    series.touched("n1")
    assert f"plumb_gpu_power_draw_watts{{{LABELS}}} 0.125\n" in _text(series)
    assert f"plumb_gpu_utilization_ratio{{{LABELS}}} 1.0\n" in _text(series)


def test_a_report_without_gpus_shows_only_when_it_came():
    state = LiveState()
    node = state.node("n1", AT)
    node.facts = {}
    node.sensors = Sensors(AT, ())
    text = _render(state)
    assert "plumb_gpu_temperature_celsius{" not in text
    assert 'plumb_node_sensors_timestamp_seconds{node="n1"} 1.7961264e+09\n' in text
