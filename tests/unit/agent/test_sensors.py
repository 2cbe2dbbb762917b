"""Sensor readings: read from NVML apart from the facts, each call guarded on its own, and
never part of the facts the stream diffs."""

from __future__ import annotations

import pynvml

from plumb import facts as wire
from plumb.agent.collect import collect_all, sensors
from plumb.sensors import GpuSensors, from_proto, to_proto


def test_a_simulated_gpu_reads_its_profiles_resting_values(simulate):
    readings = sensors.read(simulate("dgx-h100").sources())
    assert len(readings) == 8
    # dgx-h100.yaml: temperature_celsius 33; the rest are GpuSensorSpec's idle defaults, and
    # FakeNvml's 512 MiB of driver reservations.
    assert readings[7] == GpuSensors(
        index=7,
        temperature_celsius=33,
        power_draw_watts=60.0,
        sm_clock_mhz=345,
        memory_clock_mhz=1593,
        gpu_utilization_ratio=0.0,
        memory_utilization_ratio=0.0,
        memory_used_bytes=512 * 1024 * 1024,
    )


def test_an_unsupported_or_failing_reading_is_absent_and_keeps_the_rest(profile_copy, simulate):
    def edit(data):
        data["gpus"]["template"]["sensors"] = {"power_draw_watts": None}
        data["gpus"]["overrides"] = {1: {"errors": {"nvmlDeviceGetUtilizationRates": "UNKNOWN"}}}

    readings = sensors.read(simulate(str(profile_copy("hgx-a100", edit))).sources())
    assert readings[0].power_draw_watts is None  # NotSupported
    assert readings[0].temperature_celsius == 31  # hgx-a100.yaml
    assert (readings[1].gpu_utilization_ratio, readings[1].memory_utilization_ratio) == (None, None)
    assert readings[1].sm_clock_mhz == 345


def test_a_temperature_move_makes_no_delta(profile_copy, simulate):
    path = profile_copy("dgx-h100", lambda d: d.update(sensors={"temperature_jitter_c": 5}))
    sim = simulate(str(path))
    temps, facts = set(), []
    for _ in range(5):
        facts.append(collect_all(sim.sources()))
        temps.add(sensors.read(sim.sources())[0].temperature_celsius)
    assert len(temps) > 1  # the readings moved...
    assert all(wire.diff(facts[0], f) == ({}, []) for f in facts)  # ...the facts did not
    assert not any("temperature" in p for p in facts[0])
    assert all(28 <= t <= 38 for t in temps)  # 33 +/- 5


def test_readings_survive_the_wire_in_nvmls_integer_units():
    gpu = GpuSensors(3, temperature_celsius=77, power_draw_watts=612.345, gpu_utilization_ratio=1.0)
    message = to_proto([gpu])
    assert message.gpus[0].power_draw_milliwatts == 612_345
    assert message.gpus[0].gpu_utilization_percent == 100
    assert not message.gpus[0].HasField("sm_clock_mhz")
    assert from_proto(type(message).FromString(message.SerializeToString())) == (gpu,)


def test_the_fake_refuses_a_clock_nvml_does_not_know(simulate):
    nvml = simulate("l4").sources().nvml
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM) == 1593
    try:
        nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_VIDEO)
    except pynvml.NVMLError_InvalidArgument:
        pass
    else:
        raise AssertionError("NVML_CLOCK_VIDEO should be an invalid argument")
    nvml.nvmlShutdown()
