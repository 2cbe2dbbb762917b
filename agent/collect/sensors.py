"""Per-GPU sensor readings from NVML: temperature, power draw, current clocks, utilisation,
memory used.

These move every poll, so they are not facts (see plumb/v1/facts.proto): the stream sends
them apart, at most every `stream.sensor_interval_s`, and the agent's change detection never
sees them. Each call is guarded on its own: NotSupported, or any failure, leaves that reading
absent and keeps the rest. Six cheap NVML calls per GPU, no struct versions.
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
    )


def _get(call: Callable[[], Any]) -> Any:
    """`call()`, or None when the GPU does not support it or the read fails."""
    try:
        return call()
    except Exception:  # NotSupported and failures alike: this reading is absent this time
        return None
