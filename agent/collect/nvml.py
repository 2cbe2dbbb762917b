"""Driver and per-GPU facts from NVML.

Stack facts only: temperature, power draw, current clocks and utilisation are sensor readings
(collect/sensors.py), which the stream sends apart and never diffs.

Calls go only through `sources.nvml` (pynvml or its fake); the pynvml module itself supplies
constants and error classes. Every field is read on its own, so a GPU that does not support ECC,
or one call that fails, costs that field and never the rest.
"""

from __future__ import annotations

import ctypes
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pynvml

from plumb.agent.collect.xid import XidLog
from plumb.facts import Reading

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = ["ARCHITECTURES", "collect"]

log = logging.getLogger(__name__)

DRIVER_FIELDS = ("driver_version", "nvml_version", "cuda_driver_version")

# nvmlDeviceGetArchitecture's integers -> "hopper", "ampere", ...
ARCHITECTURES: dict[int, str] = {
    value: name.removeprefix("NVML_DEVICE_ARCH_").lower()
    for name, value in vars(pynvml).items()
    if name.startswith("NVML_DEVICE_ARCH_") and isinstance(value, int)
}

_ENABLED = pynvml.NVML_FEATURE_ENABLED


class _NotSupported(Exception):
    """A feature NVML has no value for, found by the collector rather than raised by NVML."""


# What "this driver or GPU has no such value" looks like: NVML's NotSupported, or a library too
# old to export the function (GSP, addressing mode, C2C and fabric calls are recent).
_UNSUPPORTED = (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound, _NotSupported)


def collect(sources: Sources) -> dict[str, Reading]:
    """The driver.* and gpus[i].* facts, each GPU's XIDs from `sources.xids` among them;
    never raises, even when NVML cannot start."""
    nvml = sources.nvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # no driver, no library: every driver fact says why
        message = _message(exc)
        log.warning("nvml unavailable", extra={"error": message})
        return {f"driver.{name}": Reading.failed(message) for name in DRIVER_FIELDS}
    try:
        return _collect_initialised(nvml, sources.xids)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:  # a failed shutdown must not lose what was read
            log.warning("nvml shutdown failed", extra={"error": _message(exc)})


def _collect_initialised(nvml: Any, xids: XidLog | None) -> dict[str, Reading]:
    out = {
        "driver.driver_version": _read(nvml.nvmlSystemGetDriverVersion, _text),
        "driver.nvml_version": _read(nvml.nvmlSystemGetNVMLVersion, _text),
        "driver.cuda_driver_version": _read(nvml.nvmlSystemGetCudaDriverVersion_v2, _cuda_version),
    }
    try:
        count = nvml.nvmlDeviceGetCount()
    except Exception as exc:
        log.warning("nvml device count failed", extra={"error": _message(exc)})
        return out
    for index in range(count):
        gpu = _gpu(nvml, index)
        bus = gpu["pci_bus_id"]
        if xids is not None and bus.status == "ok":
            gpu |= xids.readings(str(bus.value))
        out.update((f"gpus[{index}].{name}", reading) for name, reading in gpu.items())
    return out


def _gpu(nvml: Any, index: int) -> dict[str, Reading]:
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:
        failed = Reading.failed(_message(exc))
        return {"index": Reading.ok(index)} | {name: failed for name in _GPU_FIELDS[1:]}

    facts = {
        "index": _read(lambda: nvml.nvmlDeviceGetIndex(h)),
        "uuid": _read(lambda: nvml.nvmlDeviceGetUUID(h), _text),
        "name": _read(lambda: nvml.nvmlDeviceGetName(h), _text),
        "architecture": _read(
            lambda: nvml.nvmlDeviceGetArchitecture(h), lambda v: ARCHITECTURES.get(v, "unknown")
        ),
        "compute_capability": _read(
            lambda: nvml.nvmlDeviceGetCudaComputeCapability(h), lambda v: f"{v[0]}.{v[1]}"
        ),
        "memory_total_bytes": _read(lambda: nvml.nvmlDeviceGetMemoryInfo(h), lambda m: m.total),
        "vbios_version": _read(lambda: nvml.nvmlDeviceGetVbiosVersion(h), _text),
        "inforom_version": _read(lambda: nvml.nvmlDeviceGetInforomImageVersion(h), _text),
        "serial": _read(lambda: nvml.nvmlDeviceGetSerial(h), _text),
        "persistence_mode": _read(lambda: nvml.nvmlDeviceGetPersistenceMode(h), _enabled),
        "ecc_mode_current": _read(lambda: nvml.nvmlDeviceGetEccMode(h), lambda m: _enabled(m[0])),
        "ecc_uncorrected_volatile": _read(lambda: _ecc(nvml, h, pynvml.NVML_VOLATILE_ECC)),
        "ecc_uncorrected_aggregate": _read(lambda: _ecc(nvml, h, pynvml.NVML_AGGREGATE_ECC)),
        "retired_pages_pending": _read(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(h), int),
        "pcie_link_gen_current": _read(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "pcie_link_gen_max": _read(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "pcie_link_width_current": _read(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "pcie_link_width_max": _read(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(h)),
        "power_limit_watts": _read(
            lambda: nvml.nvmlDeviceGetPowerManagementLimit(h), lambda mw: mw / 1000.0
        ),
        "clock_sm_max_mhz": _read(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
        "clock_memory_max_mhz": _read(
            lambda: nvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)
        ),
        "gsp_firmware_version": _read(lambda: nvml.nvmlDeviceGetGspFirmwareVersion(h), _text),
        "addressing_mode": _read(lambda: nvml.nvmlDeviceGetAddressingMode(h), _addressing_mode),
        "c2c_mode_enabled": _read(
            lambda: nvml.nvmlDeviceGetC2cModeInfoV(h), lambda c: bool(c.isC2cEnabled)
        ),
    }
    pci_bus_id, pci_device_id = _read_many(
        lambda: nvml.nvmlDeviceGetPciInfo(h),
        lambda p: _text(p.busId),
        lambda p: f"0x{p.pciDeviceId >> 16:04X}",  # the low 16 bits are the vendor (0x10DE)
    )
    mig_current, mig_pending = _read_many(
        lambda: nvml.nvmlDeviceGetMigMode(h),
        lambda m: m[0] == pynvml.NVML_DEVICE_MIG_ENABLE,
        lambda m: m[1] == pynvml.NVML_DEVICE_MIG_ENABLE,
    )
    rows_pending, rows_failed = _read_many(
        lambda: nvml.nvmlDeviceGetRemappedRows(h), lambda r: int(r[2]), lambda r: int(r[3])
    )
    links_up, links_total = _read_many(
        lambda: _nvlink(nvml, h), lambda links: links[0], lambda links: links[1]
    )
    fabric = _read_many(
        lambda: _fabric(nvml, h),
        lambda f: _FABRIC_STATES[f.state],
        lambda f: f.cliqueId,
        lambda f: str(uuid.UUID(bytes=bytes(f.clusterUuid))),
        lambda f: _fabric_health(f),
    )
    facts |= dict(zip(_FABRIC_FIELDS, fabric, strict=True))
    facts |= {
        "pci_bus_id": pci_bus_id,
        "pci_device_id": pci_device_id,
        "mig_mode_current": mig_current,
        "mig_mode_pending": mig_pending,
        "remapped_rows_pending": rows_pending,
        "remapped_rows_failed": rows_failed,
        "nvlink_links_up": links_up,
        "nvlink_links_total": links_total,
    }
    return {name: facts[name] for name in _GPU_FIELDS}


_GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "pci_device_id",
    "architecture",
    "compute_capability",
    "memory_total_bytes",
    "vbios_version",
    "inforom_version",
    "serial",
    "persistence_mode",
    "mig_mode_current",
    "mig_mode_pending",
    "ecc_mode_current",
    "ecc_uncorrected_volatile",
    "ecc_uncorrected_aggregate",
    "retired_pages_pending",
    "remapped_rows_pending",
    "remapped_rows_failed",
    "pcie_link_gen_current",
    "pcie_link_gen_max",
    "pcie_link_width_current",
    "pcie_link_width_max",
    "nvlink_links_up",
    "nvlink_links_total",
    "power_limit_watts",
    "clock_sm_max_mhz",
    "clock_memory_max_mhz",
    "gsp_firmware_version",
    "addressing_mode",
    "c2c_mode_enabled",
    "fabric_state",
    "fabric_clique_id",
    "fabric_cluster_uuid",
    "fabric_health",
)
_FABRIC_FIELDS = ("fabric_state", "fabric_clique_id", "fabric_cluster_uuid", "fabric_health")

# nvmlDeviceGetGpuFabricInfoV's states and health summaries -> fact values; NOT_SUPPORTED is
# no fabric at all (every fabric fact not_supported).
_FABRIC_STATES = {
    pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED: "not_started",
    pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS: "in_progress",
    pynvml.NVML_GPU_FABRIC_STATE_COMPLETED: "completed",
}
_FABRIC_HEALTH = {
    pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY: "healthy",
    pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY: "unhealthy",
    pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY: "limited_capacity",
}
_ADDRESSING_MODES = {
    pynvml.NVML_DEVICE_ADDRESSING_MODE_NONE: "none",
    pynvml.NVML_DEVICE_ADDRESSING_MODE_HMM: "hmm",
    pynvml.NVML_DEVICE_ADDRESSING_MODE_ATS: "ats",
}


def _ecc(nvml: Any, handle: Any, counter: int) -> int:
    return nvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter
    )


def _nvlink(nvml: Any, handle: Any) -> tuple[int, int]:
    """(links up, links present): a link NVML rejects is absent; none at link 0 means no NVLink."""
    up = total = 0
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_InvalidArgument) as exc:
            if link == 0:
                raise _NotSupported from exc
            continue
        total += 1
        up += state == _ENABLED
    return up, total


def _fabric(nvml: Any, handle: Any) -> Any:
    """The GPU's fabric info (struct v3, with the health summary; v2 on drivers that predate
    it); raises _NotSupported where the GPU has no fabric."""
    info: Any = pynvml.c_nvmlGpuFabricInfo_v3_t()
    try:
        nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    except pynvml.NVMLError_ArgumentVersionMismatch:
        info = pynvml.c_nvmlGpuFabricInfoV_t()
        info.version = pynvml.nvmlGpuFabricInfo_v2
        nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    if info.state not in _FABRIC_STATES:
        raise _NotSupported
    return info


def _fabric_health(info: Any) -> str:
    health = _FABRIC_HEALTH.get(getattr(info, "healthSummary", None))
    if health is None:
        raise _NotSupported  # a v2 struct, or a GPU that does not summarise its health
    return health


def _addressing_mode(mode: int) -> str:
    return _ADDRESSING_MODES.get(mode, "unknown")


def _read(call: Callable[[], Any], convert: Callable[[Any], Any] = lambda v: v) -> Reading:
    """One fact: the converted result of `call`, or why there is none."""
    return _read_many(call, convert)[0]


def _read_many(call: Callable[[], Any], *converts: Callable[[Any], Any]) -> list[Reading]:
    """Facts that share one NVML call: each converter's result, or the call's failure for all."""
    try:
        value = call()
    except _UNSUPPORTED:
        return [Reading.not_supported()] * len(converts)
    except Exception as exc:  # one field's failure must never lose the others
        return [Reading.failed(_message(exc))] * len(converts)
    return [_convert(convert, value) for convert in converts]


def _convert(convert: Callable[[Any], Any], value: Any) -> Reading:
    try:
        return Reading.ok(convert(value))
    except _UNSUPPORTED:
        return Reading.not_supported()
    except Exception as exc:  # a bad value in one field must never lose the others
        return Reading.failed(_message(exc))


def _message(exc: BaseException) -> str:
    if isinstance(exc, pynvml.NVMLError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _text(value: str | bytes) -> str:
    """pynvml gives str for most strings, bytes from ctypes struct fields and older builds."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _enabled(value: int) -> bool:
    return value == _ENABLED


def _cuda_version(code: int) -> str:
    return f"{code // 1000}.{code % 1000 // 10}"  # 12040 -> "12.4"
