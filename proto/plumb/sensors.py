"""GPU sensor readings as both ends of the stream agree on them (plumb.v1.SensorReport).

Readings are not facts (see "Stack facts vs sensor readings" in plumb/v1/facts.proto): they
have no path, no hash, no history. `GpuSensors` holds one GPU's readings in the units the
aggregator exports (watts, ratios, bytes, counts); the wire carries NVML's integers. A report
is whole (`to_proto`, `from_proto`) or, between two ends that agreed on it, only what moved
since the last one on the stream (`changes_proto`, `apply_changes`). Decoding refuses what no
GPU can report, naming the field, so nothing out of range reaches a gauge.
"""

from __future__ import annotations

from typing import NamedTuple

from plumb.v1 import facts_pb2

__all__ = [
    "BOUNDS",
    "CLOCK_EVENT_REASONS",
    "READINGS",
    "GpuSensors",
    "SensorsError",
    "active_reasons",
    "apply_changes",
    "changes_proto",
    "from_proto",
    "to_proto",
]

# The largest value each wire field may carry, far beyond any GPU yet (a few hundred W and
# up to ~100 °C, clocks of a few GHz, 288 GB of HBM), so only a broken agent hits them.
BOUNDS: dict[str, int] = {
    "temperature_celsius": 200,  # NVML reports 0..~110; the board shuts down far below 200
    "power_draw_milliwatts": 10_000_000,  # 10 kW: a GB300 superchip draws ~1.4 kW
    "sm_clock_mhz": 20_000,
    "memory_clock_mhz": 20_000,
    "gpu_utilization_percent": 100,
    "memory_utilization_percent": 100,
    "memory_used_bytes": 1 << 42,  # 4 TiB
    "clock_event_reasons": (1 << 64) - 1,  # a mask: bits NVML adds later pass through
    # Error counters: 2**53, the last integer a float64 sample holds exactly; a GPU at one
    # error per microsecond would take 285 years to get there.
    "ecc_corrected_volatile": 1 << 53,
    "ecc_corrected_aggregate": 1 << 53,
    "pcie_replay_count": 1 << 32,  # NVML's counter is an unsigned int
    "nvlink_replay_errors": 1 << 53,
    "nvlink_recovery_errors": 1 << 53,
    "nvlink_crc_flit_errors": 1 << 53,
}

# Why the clocks are below their maximum: reason -> its bit in NVML's clock-event mask
# (nvml.h's nvmlClocksEventReason*; the names are nvidia-smi's, as in `-q -x`). These are the
# reasons exported per GPU; the configuration ones (applications clocks, display clocks) are
# not: they say how the GPU was set up, never that something happened to it.
CLOCK_EVENT_REASONS: dict[str, int] = {
    "gpu_idle": 0x1,  # nothing runs: clocks idle down
    "sw_power_cap": 0x4,  # the driver holds draw at the power limit: normal under load
    "hw_slowdown": 0x8,  # the board halves the clocks or more (thermal, power brake, fast trigger)
    "sync_boost": 0x10,  # held to the slowest GPU of its sync-boost group
    "sw_thermal_slowdown": 0x20,  # the driver cools an over-hot GPU
    "hw_thermal_slowdown": 0x40,  # the board itself cools an over-hot GPU
    "hw_power_brake_slowdown": 0x80,  # the system's power brake (a PSU or rack limit) fired
}


class GpuSensors(NamedTuple):
    """One GPU's latest readings; None is a reading the GPU does not support (or failed).

    Immutable as the core's frozen dataclasses are, but built and compared in C: the
    aggregator makes one for every GPU of every report (2,700 a second from 10,000 8-GPU
    nodes at the agents' 30 s), and a frozen dataclass's __init__ was 7 % of its steady CPU
    there."""

    index: int
    temperature_celsius: int | None = None
    power_draw_watts: float | None = None
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    gpu_utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    clock_event_reasons: int | None = None  # NVML's mask (CLOCK_EVENT_REASONS)
    ecc_corrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    pcie_replay_count: int | None = None
    nvlink_replay_errors: int | None = None
    nvlink_recovery_errors: int | None = None
    nvlink_crc_flit_errors: int | None = None

    def to_json(self) -> dict[str, int | float | list[str] | None]:
        """The API's shape: every reading by name, None where absent; the clock-event mask as
        the names of its active reasons."""
        out: dict[str, int | float | list[str] | None] = self._asdict()
        if self.clock_event_reasons is not None:
            out["clock_event_reasons"] = active_reasons(self.clock_event_reasons)
        return out


def active_reasons(mask: int) -> list[str]:
    """The CLOCK_EVENT_REASONS set in `mask`, in bit order."""
    return [reason for reason, bit in CLOCK_EVENT_REASONS.items() if mask & bit]


# The readings, by their name here: (wire field, wire units per unit here).
READINGS: dict[str, tuple[str, int]] = {
    "temperature_celsius": ("temperature_celsius", 1),
    "power_draw_watts": ("power_draw_milliwatts", 1000),
    "sm_clock_mhz": ("sm_clock_mhz", 1),
    "memory_clock_mhz": ("memory_clock_mhz", 1),
    "gpu_utilization_ratio": ("gpu_utilization_percent", 100),
    "memory_utilization_ratio": ("memory_utilization_percent", 100),
    "memory_used_bytes": ("memory_used_bytes", 1),
    "clock_event_reasons": ("clock_event_reasons", 1),
    "ecc_corrected_volatile": ("ecc_corrected_volatile", 1),
    "ecc_corrected_aggregate": ("ecc_corrected_aggregate", 1),
    "pcie_replay_count": ("pcie_replay_count", 1),
    "nvlink_replay_errors": ("nvlink_replay_errors", 1),
    "nvlink_recovery_errors": ("nvlink_recovery_errors", 1),
    "nvlink_crc_flit_errors": ("nvlink_crc_flit_errors", 1),
}


# (wire field, wire units per unit here, BOUNDS) in GpuSensors' field order after the index,
# so from_proto builds each GpuSensors from its values in place.
_WIRE: tuple[tuple[str, int, int], ...] = tuple(
    (wire, scale, BOUNDS[wire])
    for wire, scale in (READINGS[name] for name in GpuSensors._fields[1:])
)


class SensorsError(ValueError):
    """A SensorReport that breaks the contract; the message names the field."""


def to_proto(gpus: list[GpuSensors]) -> facts_pb2.SensorReport:
    """The wire form of `gpus`' readings (rounded to NVML's integer units)."""
    report = facts_pb2.SensorReport()
    for gpu in gpus:
        msg = report.gpus.add(index=gpu.index)
        for name, (wire, scale) in READINGS.items():
            value = getattr(gpu, name)
            if value is not None:
                setattr(msg, wire, round(value * scale))
    return report


def from_proto(report: facts_pb2.SensorReport) -> tuple[GpuSensors, ...]:
    """The readings of `report`, by GPU index; SensorsError on a repeated index or a value
    beyond BOUNDS."""
    out: list[GpuSensors] = []
    seen: set[int] = set()
    for i, msg in enumerate(report.gpus):
        if msg.index in seen:
            raise _twice(i, msg.index)
        seen.add(msg.index)
        values: list[int | float | None] = [msg.index]
        for wire, scale, bound in _WIRE:
            value = getattr(msg, wire)
            # Only a 0 may be unset (proto3 presence): HasField is the dearer call.
            if not value and not msg.HasField(wire):
                values.append(None)
                continue
            if value > bound:
                raise _beyond(i, wire, value, bound)
            values.append(value / scale if scale != 1 else value)
        out.append(GpuSensors(*values))  # type: ignore[arg-type]
    return tuple(sorted(out, key=lambda g: g.index))


def changes_proto(gpus: list[GpuSensors], last: list[GpuSensors]) -> facts_pb2.SensorReport | None:
    """The changes-only report of `gpus` since `last`, the readings of the stream's last
    report: each GPU with the readings whose wire value moved (and their bits in `moved`), a
    GPU with none left out. None where only a whole report can say it: a GPU came, went or
    moved in the order, or a reading `last` had is gone."""
    if [gpu.index for gpu in gpus] != [gpu.index for gpu in last]:
        return None
    report = facts_pb2.SensorReport(changes_only=True)
    for gpu, before in zip(gpus, last, strict=True):
        msg = None
        for bit, (wire, scale, _) in enumerate(_WIRE):
            value, old = gpu[bit + 1], before[bit + 1]
            if value is None:
                if old is not None:
                    return None
                continue
            value = round(value * scale)
            if old is not None and value == round(old * scale):
                continue
            if msg is None:
                msg = report.gpus.add(index=gpu.index)
            setattr(msg, wire, value)
            msg.moved |= 1 << bit
    return report


def apply_changes(
    held: tuple[GpuSensors, ...], report: facts_pb2.SensorReport
) -> tuple[GpuSensors, ...]:
    """`held`, the readings of the stream's last report, with the changes of the
    changes-only `report`; SensorsError on a GPU `held` has not, a GPU twice, a bit of
    `moved` that names no reading, or a value beyond BOUNDS. Reads only what moved."""
    positions = {gpu.index: k for k, gpu in enumerate(held)}
    out = list(held)
    seen: set[int] = set()
    for i, msg in enumerate(report.gpus):
        k = positions.get(msg.index)
        if k is None:
            raise SensorsError(
                f"gpus[{i}].index: GPU {msg.index} is not in the readings this stream sent "
                "before; a GPU that comes needs a whole report"
            )
        if msg.index in seen:
            raise _twice(i, msg.index)
        seen.add(msg.index)
        moved = msg.moved
        if moved >> len(_WIRE):
            raise SensorsError(
                f"gpus[{i}].moved: bit {moved.bit_length() - 1} names no reading "
                f"(bits 0-{len(_WIRE) - 1} do)"
            )
        values = list(out[k])
        while moved:
            low = moved & -moved
            moved ^= low
            bit = low.bit_length() - 1
            wire, scale, bound = _WIRE[bit]
            value = getattr(msg, wire)
            if value > bound:
                raise _beyond(i, wire, value, bound)
            values[bit + 1] = value / scale if scale != 1 else value
        out[k] = GpuSensors._make(values)
    return tuple(out)


def _twice(i: int, index: int) -> SensorsError:
    return SensorsError(f"gpus[{i}].index: GPU {index} is reported twice")


def _beyond(i: int, wire: str, value: int, bound: int) -> SensorsError:
    return SensorsError(f"gpus[{i}].{wire}: {value} is beyond {bound}, which no GPU reports")
