"""Sensor readings: read from NVML apart from the facts, each call guarded on its own, and
never part of the facts the stream diffs."""

from __future__ import annotations

import pynvml
import pytest

from plumb import facts as wire
from plumb.agent.collect import collect_all, sensors
from plumb.sensors import (
    CLOCK_EVENT_REASONS,
    GpuSensors,
    SensorsError,
    apply_changes,
    changes_proto,
    from_proto,
    to_proto,
)
from plumb.v1 import facts_pb2


def test_a_simulated_gpu_reads_its_profiles_resting_values(simulate):
    readings = sensors.read(simulate("dgx-h100").sources())
    assert len(readings) == 8
    # dgx-h100.yaml: temperature_celsius 33, ECC on, 18 NVLinks; the rest are the profile
    # schema's idle defaults (gpu_idle, no errors), and FakeNvml's 512 MiB of driver
    # reservations.
    assert readings[7] == GpuSensors(
        index=7,
        temperature_celsius=33,
        power_draw_watts=60.0,
        sm_clock_mhz=345,
        memory_clock_mhz=1593,
        gpu_utilization_ratio=0.0,
        memory_utilization_ratio=0.0,
        memory_used_bytes=512 * 1024 * 1024,
        clock_event_reasons=pynvml.nvmlClocksEventReasonGpuIdle,
        ecc_corrected_volatile=0,
        ecc_corrected_aggregate=0,
        pcie_replay_count=0,
        nvlink_replay_errors=0,
        nvlink_recovery_errors=0,
        nvlink_crc_flit_errors=0,
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


def test_a_reading_of_zero_stays_zero_and_an_unread_one_stays_none():
    # An idle GPU reads 0 % busy and 0 errors; a GPU that does not support a counter has none.
    idle = GpuSensors(
        2,
        gpu_utilization_ratio=0.0,
        memory_utilization_ratio=0.0,
        clock_event_reasons=0,
        ecc_corrected_volatile=0,
        pcie_replay_count=0,
    )
    message = to_proto([idle])
    assert message.gpus[0].HasField("pcie_replay_count")
    assert not message.gpus[0].HasField("nvlink_replay_errors")
    (back,) = from_proto(type(message).FromString(message.SerializeToString()))
    assert back == idle
    assert back.gpu_utilization_ratio == 0.0 and back.pcie_replay_count == 0
    assert back.nvlink_replay_errors is None and back.temperature_celsius is None


def test_every_reading_lands_in_its_own_field():
    gpu = GpuSensors(
        5,
        temperature_celsius=41,
        power_draw_watts=702.5,
        sm_clock_mhz=1980,
        memory_clock_mhz=2619,
        gpu_utilization_ratio=0.37,
        memory_utilization_ratio=0.12,
        memory_used_bytes=81_000_000_000,
        clock_event_reasons=0x4,
        ecc_corrected_volatile=3,
        ecc_corrected_aggregate=19,
        pcie_replay_count=7,
        nvlink_replay_errors=11,
        nvlink_recovery_errors=13,
        nvlink_crc_flit_errors=17,
    )
    message = to_proto([gpu])
    assert message.gpus[0].memory_utilization_percent == 12
    assert message.gpus[0].nvlink_recovery_errors == 13
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


def test_clock_event_reasons_are_nvmls_bits():
    assert CLOCK_EVENT_REASONS == {
        "gpu_idle": pynvml.nvmlClocksEventReasonGpuIdle,
        "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
        "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
        "sync_boost": pynvml.nvmlClocksEventReasonSyncBoost,
        "sw_thermal_slowdown": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
        "hw_thermal_slowdown": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
        "hw_power_brake_slowdown": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
    }


def test_error_counters_and_clock_events_come_from_the_profile(profile_copy, simulate):
    def edit(data):
        gpu = data["gpus"]["template"]
        gpu["ecc"] = {"enabled": True, "corrected_volatile": 12, "corrected_aggregate": 3400}
        gpu["pcie"]["replay_count"] = 150
        gpu["sensors"] = {"clock_event_reasons": ["sw_power_cap", "hw_slowdown"]}
        data["gpus"]["overrides"] = {
            3: {
                "nvlink": {
                    "links_total": 18,
                    "links_up": 18,
                    "link_errors": {
                        0: {"crc_flit": 5, "replay": 1},
                        17: {"crc_flit": 2, "recovery": 1},
                    },
                }
            }
        }

    readings = sensors.read(simulate(str(profile_copy("dgx-h100", edit))).sources())
    gpu3 = readings[3]
    assert gpu3.clock_event_reasons == 0x4 | 0x8  # nvml.h: SwPowerCap, HwSlowdown
    assert (gpu3.ecc_corrected_volatile, gpu3.ecc_corrected_aggregate) == (12, 3400)
    assert gpu3.pcie_replay_count == 150
    # Summed over the links: 5 + 2 CRC flit errors, 1 replay on link 0, 1 recovery on 17.
    assert (gpu3.nvlink_crc_flit_errors, gpu3.nvlink_replay_errors) == (7, 1)
    assert gpu3.nvlink_recovery_errors == 1
    assert readings[0].nvlink_crc_flit_errors == 0
    assert gpu3.to_json()["clock_event_reasons"] == ["sw_power_cap", "hw_slowdown"]


def test_a_gpu_without_nvlink_or_ecc_has_no_such_readings(simulate):
    (gpu,) = sensors.read(simulate("rtx-4090").sources())  # rtx-4090.yaml: no ECC, no NVLink
    assert gpu.ecc_corrected_volatile is None and gpu.ecc_corrected_aggregate is None
    assert gpu.nvlink_replay_errors is None and gpu.nvlink_crc_flit_errors is None
    assert gpu.pcie_replay_count == 0
    assert gpu.clock_event_reasons == pynvml.nvmlClocksEventReasonGpuIdle


def test_a_driver_without_clocks_event_reasons_is_read_by_the_older_name(profile_copy, simulate):
    def edit(data):
        data["gpus"]["template"]["errors"] = {
            "nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND"
        }
        data["gpus"]["template"]["sensors"] = {"clock_event_reasons": ["hw_power_brake_slowdown"]}

    readings = sensors.read(simulate(str(profile_copy("l4", edit))).sources())
    assert readings[0].clock_event_reasons == pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown


def test_counters_survive_the_wire_and_absurd_ones_are_refused():
    gpu = GpuSensors(
        0, clock_event_reasons=0x1 | 0x400, pcie_replay_count=174, nvlink_crc_flit_errors=10**12
    )
    message = to_proto([gpu])
    assert from_proto(type(message).FromString(message.SerializeToString())) == (gpu,)
    message.gpus[0].ecc_corrected_volatile = 2**60
    with pytest.raises(SensorsError, match=r"gpus\[0\]\.ecc_corrected_volatile"):
        from_proto(message)


def wired(report: facts_pb2.SensorReport) -> facts_pb2.SensorReport:
    return type(report).FromString(report.SerializeToString())


BEFORE = [
    GpuSensors(0, temperature_celsius=40, power_draw_watts=300.0, gpu_utilization_ratio=0.35),
    GpuSensors(1, temperature_celsius=44, power_draw_watts=72.5, ecc_corrected_volatile=3),
]


def test_changes_carry_only_the_readings_whose_wire_value_moved():
    now = [
        # 300.0004 W is 300,000 mW on the wire as before: not a move. Utilisation to 0 is one.
        BEFORE[0]._replace(power_draw_watts=300.0004, gpu_utilization_ratio=0.0),
        BEFORE[1],
    ]
    report = wired(changes_proto(now, BEFORE))
    assert report.changes_only
    assert len(report.gpus) == 1  # GPU 1 did not move
    (msg,) = report.gpus
    assert msg.index == 0 and msg.moved == 0b10000  # bit 4: field 6, gpu_utilization_percent
    assert msg.gpu_utilization_percent == 0 and not msg.HasField("power_draw_milliwatts")
    held = from_proto(wired(to_proto(BEFORE)))
    assert apply_changes(held, report) == (
        GpuSensors(0, temperature_celsius=40, power_draw_watts=300.0, gpu_utilization_ratio=0.0),
        BEFORE[1],
    )


def test_a_reading_that_comes_is_a_change_and_one_that_goes_needs_a_whole_report():
    came = [BEFORE[0], BEFORE[1]._replace(pcie_replay_count=174)]
    (msg,) = wired(changes_proto(came, BEFORE)).gpus
    assert (msg.index, msg.moved, msg.pcie_replay_count) == (1, 1 << 10, 174)
    gone = [BEFORE[0], BEFORE[1]._replace(ecc_corrected_volatile=None)]
    assert changes_proto(gone, BEFORE) is None
    assert changes_proto(BEFORE[:1], BEFORE) is None  # a GPU went
    assert changes_proto(BEFORE[::-1], BEFORE) is None  # the order moved


def test_nothing_moved_is_an_empty_report_that_changes_nothing():
    report = wired(changes_proto(BEFORE, BEFORE))
    assert report.changes_only and not report.gpus
    held = from_proto(to_proto(BEFORE))
    assert apply_changes(held, report) == held


@pytest.mark.parametrize(
    ("gpus", "says"),
    [
        ([facts_pb2.GpuSensors(index=2, moved=1)], r"gpus\[0\]\.index: GPU 2 is not in"),
        (
            [facts_pb2.GpuSensors(index=1, moved=1), facts_pb2.GpuSensors(index=1, moved=1)],
            r"gpus\[1\]\.index: GPU 1 is reported twice",
        ),
        ([facts_pb2.GpuSensors(index=0, moved=1 << 14)], r"gpus\[0\]\.moved: bit 14 names"),
        (
            [facts_pb2.GpuSensors(index=0, temperature_celsius=201, moved=1)],
            r"gpus\[0\]\.temperature_celsius: 201 is beyond 200",
        ),
    ],
)
def test_changes_no_stream_could_have_sent_are_refused_naming_the_field(gpus, says):
    report = facts_pb2.SensorReport(gpus=gpus, changes_only=True)
    with pytest.raises(SensorsError, match=says):
        apply_changes(from_proto(to_proto(BEFORE)), report)
