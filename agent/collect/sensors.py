"""Per-GPU sensor readings from NVML: temperature, power draw, current clocks, utilisation,
memory used, clock-event reasons, correctable ECC, PCIe replays and NVLink error counters.

These move every poll, so they are not facts (see plumb/v1/facts.proto): the stream sends
them apart, at most every `stream.sensor_interval_s`, and the agent's change detection never
sees them. Each call is guarded on its own: NotSupported, or any failure, leaves that reading
absent and keeps the rest. Eleven cheap NVML calls per GPU, no struct versions, then the NVLink
error counters: three per link the GPU has, one per other link (none past link 0 without NVLink).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pynvml

from plumb.sensors import GpuSensors

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = ["read"]

log = logging.getLogger(__name__)


def read(sources: Sources) -> list[GpuSensors]:
    """Every GPU's readings now; empty when NVML cannot start or count its GPUs."""
    nvml = sources.nvml
    try:
        nvml.nvmlInit()
    except Exception:  # the facts collector logs why NVML is unavailable
        return []
    try:
        count = nvml.nvmlDeviceGetCount()
        return [_gpu(nvml, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    except Exception as exc:  # a GPU whose handle fails: no readings this time
        log.debug("nvml sensors failed", extra={"error": str(exc)})
        return []
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:
            log.debug("nvml shutdown failed", extra={"error": str(exc)})


def _gpu(nvml: Any, h: Any) -> GpuSensors:
    utilization = _get(lambda: nvml.nvmlDeviceGetUtilizationRates(h))
    return GpuSensors(
        index=nvml.nvmlDeviceGetIndex(h),
        temperature_celsius=_get(
            lambda: nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
        ),
        power_draw_watts=_get(lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
        sm_clock_mhz=_get(lambda: nvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
        memory_clock_mhz=_get(lambda: nvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
        gpu_utilization_ratio=None if utilization is None else utilization.gpu / 100,
        memory_utilization_ratio=None if utilization is None else utilization.memory / 100,
        memory_used_bytes=_get(lambda: nvml.nvmlDeviceGetMemoryInfo(h).used),
        clock_event_reasons=_get(lambda: _clock_event_reasons(nvml, h)),
        ecc_corrected_volatile=_get(lambda: _corrected(nvml, h, pynvml.NVML_VOLATILE_ECC)),
        ecc_corrected_aggregate=_get(lambda: _corrected(nvml, h, pynvml.NVML_AGGREGATE_ECC)),
        pcie_replay_count=_get(lambda: nvml.nvmlDeviceGetPcieReplayCounter(h)),
        **_nvlink_errors(nvml, h),
    )


def _clock_event_reasons(nvml: Any, h: Any) -> int:
    """NVML's clock-event mask; drivers before 535 only have the function's older name."""
    try:
        return nvml.nvmlDeviceGetCurrentClocksEventReasons(h)
    except pynvml.NVMLError_FunctionNotFound:
        return nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)


def _corrected(nvml: Any, h: Any, counter: int) -> int:
    return nvml.nvmlDeviceGetTotalEccErrors(h, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, counter)


# Reading -> NVML's NVLink error counter, summed over the GPU's links.
_NVLINK_COUNTERS = {
    "nvlink_replay_errors": pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
    "nvlink_recovery_errors": pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
    "nvlink_crc_flit_errors": pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
}


def _nvlink_errors(nvml: Any, h: Any) -> dict[str, int | None]:
    """Each NVLink error counter summed over the links that answer; None where no link does
    (no NVLink, or a GPU whose NVML has no per-link counters)."""
    totals: dict[str, int | None] = dict.fromkeys(_NVLINK_COUNTERS)
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        for name, counter in _NVLINK_COUNTERS.items():
            value = _link_counter(nvml, h, link, counter)
            if value is None:
                if name != "nvlink_replay_errors":
                    continue
                if link == 0:
                    return totals  # none at link 0: no NVLink, as the facts collector says
                break  # a link NVML has not got (or cannot count): skip its other calls
            totals[name] = (totals[name] or 0) + value
    return totals


def _link_counter(nvml: Any, h: Any, link: int, counter: int) -> int | None:
    return _get(lambda: nvml.nvmlDeviceGetNvLinkErrorCounter(h, link, counter))


def _get(call: Callable[[], Any]) -> Any:
    """`call()`, or None when the GPU does not support it or the read fails."""
    try:
        return call()
    except Exception:  # NotSupported and failures alike: this reading is absent this time
        return None
