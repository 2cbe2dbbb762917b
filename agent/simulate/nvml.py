"""A profile-driven stand-in for the `pynvml` module.

`FakeNvml` has the functions the NVML collector and the XID watcher call, with pynvml's
names, parameters and return shapes, and it raises pynvml's own error classes, so the
collector cannot tell it from a real driver. A contract test holds it to pynvml's signatures.
XID events come from the profile's `xids`, through an `XidSchedule` that outlives reloads.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass
from typing import TypeVar

import pynvml

from plumb.agent.simulate.events import FakeEventSet, XidSchedule
from plumb.agent.simulate.profile import GpuSpec, Profile
from plumb.sensors import CLOCK_EVENT_REASONS

__all__ = ["FakeNvml", "gpu_uuid"]

T = TypeVar("T")

_MIB = 1024 * 1024
_USED_MIB = 512  # what an idle GPU's driver reservations look like in nvidia-smi
_UUID_NAMESPACE = uuid.UUID("5b0d3c5e-6a8f-4f62-9a3e-2f1d4c7b9e10")


def gpu_uuid(node_name: str, index: int) -> str:
    """The deterministic UUID of simulated GPU `index` on `node_name`."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node_name}/gpu/{index}')}"


def _serial(node_name: str, index: int) -> str:
    digest = hashlib.sha256(f"{node_name}/gpu/{index}".encode()).hexdigest()
    return f"1654{int(digest, 16) % 10**9:09d}"


def _bus_id(index: int) -> str:
    return f"00000000:{0x18 + 0x0E * index:02X}:00.0"  # distinct for up to 16 GPUs


def _error(code: int) -> pynvml.NVMLError:
    # pynvml's factory maps the code to its subclass (NVMLError_NotSupported, ...).
    return pynvml.NVMLError(code)


@dataclass(frozen=True)
class FakeHandle:
    """What nvmlDeviceGetHandleByIndex returns: opaque to callers, like c_nvmlDevice_t."""

    index: int


@dataclass(frozen=True)
class PciInfo:
    """The fields of pynvml's nvmlPciInfo_t the agent reads (busId is bytes, as from ctypes)."""

    busId: bytes  # pynvml's field name
    domain: int
    bus: int
    device: int
    pciDeviceId: int
    pciSubSystemId: int


@dataclass(frozen=True)
class MemoryInfo:
    """pynvml's c_nvmlMemory_t: bytes total, free and used."""

    total: int
    free: int
    used: int


@dataclass(frozen=True)
class EventData:
    """pynvml's c_nvmlEventData_t, as nvmlEventSetWait_v2 returns it."""

    device: FakeHandle
    eventType: int
    eventData: int  # the XID code
    gpuInstanceId: int = 0xFFFFFFFF  # not attributed to a MIG instance
    computeInstanceId: int = 0xFFFFFFFF


# NVML's NVLink error counter -> the field of the profile's NvlinkErrorsSpec.
_NVLINK_COUNTERS = {
    pynvml.NVML_NVLINK_ERROR_DL_REPLAY: "replay",
    pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: "recovery",
    pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc_flit",
}

# The only events the fake can deliver; registering others is NotSupported, as on a GPU
# that lacks them.
_SUPPORTED_EVENTS = pynvml.nvmlEventTypeXidCriticalError


class FakeNvml:
    """NVML for a simulated node, built from a profile and the node's name; `xids` is the
    node's XID schedule (one of its own, planned from `profile`, when not given)."""

    def __init__(self, profile: Profile, node_name: str, xids: XidSchedule | None = None) -> None:
        self._driver = profile.driver
        self._node_name = node_name
        self._gpus = profile.gpu_specs()
        self._motion = profile.sensors
        # Readings move reproducibly per node: a test with jitter sees the same sequence.
        self._rng = random.Random(node_name)
        self._init_count = 0
        if xids is None:
            xids = XidSchedule()
            xids.plan(profile.xids)
        self._xids = xids

    # -- library -----------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        if not self._driver.loaded:
            raise _error(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        self._ready()
        self._init_count -= 1

    def _ready(self) -> None:
        if self._init_count <= 0:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)

    # -- system ------------------------------------------------------------------------------

    def nvmlSystemGetDriverVersion(self) -> str:
        self._ready()
        return self._driver.version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._ready()
        return _supported(self._driver.nvml_version)

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._ready()
        return self._driver.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._ready()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._ready()
        if not 0 <= index < len(self._gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    # -- per device --------------------------------------------------------------------------

    def _gpu(self, handle: FakeHandle, function: str) -> GpuSpec:
        """The GPU behind `handle`, raising the error the profile sets for `function`."""
        self._ready()
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self._gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self._gpus[handle.index]
        if function in gpu.errors:
            raise _error(getattr(pynvml, f"NVML_ERROR_{gpu.errors[function]}"))
        return gpu

    def nvmlDeviceGetIndex(self, handle):
        self._gpu(handle, "nvmlDeviceGetIndex")
        return handle.index

    def nvmlDeviceGetUUID(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetUUID")
        return gpu.uuid or gpu_uuid(self._node_name, handle.index)

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetPciInfo(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetPciInfo")
        bus_id = gpu.pci_bus_id or _bus_id(handle.index)
        domain, bus, device = bus_id.split(":")
        return PciInfo(
            busId=bus_id.encode(),
            domain=int(domain, 16),
            bus=int(bus, 16),
            device=int(device.split(".")[0], 16),
            pciDeviceId=(gpu.pci_device_id << 16) | 0x10DE,  # low 16 bits: NVIDIA's vendor id
            pciSubSystemId=0,
        )

    def nvmlDeviceGetArchitecture(self, device):
        arch = _supported(self._gpu(device, "nvmlDeviceGetArchitecture").architecture)
        return getattr(pynvml, f"NVML_DEVICE_ARCH_{arch.upper()}")

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetCudaComputeCapability")
        major, minor = _supported(gpu.compute_capability).split(".")
        return (int(major), int(minor))

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        total = _supported(self._gpu(handle, "nvmlDeviceGetMemoryInfo").memory_total_mib) * _MIB
        used = min(_USED_MIB * _MIB, total)
        return MemoryInfo(total=total, free=total - used, used=used)

    def nvmlDeviceGetVbiosVersion(self, handle):
        return _supported(self._gpu(handle, "nvmlDeviceGetVbiosVersion").vbios_version)

    def nvmlDeviceGetInforomImageVersion(self, handle):
        return _supported(self._gpu(handle, "nvmlDeviceGetInforomImageVersion").inforom_version)

    def nvmlDeviceGetSerial(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetSerial")
        if "serial" not in gpu.model_fields_set:
            return _serial(self._node_name, handle.index)
        return _supported(gpu.serial)

    def nvmlDeviceGetPersistenceMode(self, handle):
        return _state(
            _supported(self._gpu(handle, "nvmlDeviceGetPersistenceMode").persistence_mode)
        )

    def nvmlDeviceGetMigMode(self, device):
        mig = _supported(self._gpu(device, "nvmlDeviceGetMigMode").mig)
        return [int(mig.current), int(mig.pending)]

    def nvmlDeviceGetEccMode(self, handle):
        ecc = _supported(self._gpu(handle, "nvmlDeviceGetEccMode").ecc)
        return [_state(ecc.enabled), _state(ecc.enabled)]

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        ecc = _supported(self._gpu(handle, "nvmlDeviceGetTotalEccErrors").ecc)
        if not ecc.enabled:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        counts = {
            (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC): (
                ecc.uncorrected_volatile
            ),
            (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): (
                ecc.uncorrected_aggregate
            ),
            (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC): (
                ecc.corrected_volatile
            ),
            (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC): (
                ecc.corrected_aggregate
            ),
        }
        if (errorType, counterType) not in counts:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _supported(counts[errorType, counterType])

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device):
        gpu = self._gpu(device, "nvmlDeviceGetRetiredPagesPendingStatus")
        return _state(_supported(gpu.retired_pages_pending))

    def nvmlDeviceGetRemappedRows(self, device):
        rows = _supported(self._gpu(device, "nvmlDeviceGetRemappedRows").remapped_rows)
        return (rows.correctable, rows.uncorrectable, int(rows.pending), int(rows.failed))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        pcie = _supported(self._gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration").pcie)
        return _supported(pcie.gen_current)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return _supported(
            _supported(self._gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration").pcie).gen_max
        )

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        pcie = _supported(self._gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth").pcie)
        return _supported(pcie.width_current)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return _supported(
            _supported(self._gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth").pcie).width_max
        )

    def nvmlDeviceGetNvLinkState(self, device, link):
        nvlink = _supported(self._gpu(device, "nvmlDeviceGetNvLinkState").nvlink)
        if not 0 <= link < nvlink.links_total:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _state(link < nvlink.links_up)

    def nvmlDeviceGetNvLinkErrorCounter(self, device, link, counter):
        """The profile's count for `link`; the data-link counters it does not model (CRC and
        ECC on data) are NotSupported."""
        nvlink = _supported(self._gpu(device, "nvmlDeviceGetNvLinkErrorCounter").nvlink)
        if not 0 <= link < nvlink.links_total:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        field = _NVLINK_COUNTERS.get(counter)
        if field is None:
            raise _error(
                pynvml.NVML_ERROR_NOT_SUPPORTED
                if 0 <= counter < pynvml.NVML_NVLINK_ERROR_COUNT
                else pynvml.NVML_ERROR_INVALID_ARGUMENT
            )
        errors = _supported(nvlink.link_errors).get(link)
        return 0 if errors is None else getattr(errors, field)

    def nvmlDeviceGetPcieReplayCounter(self, handle):
        pcie = _supported(self._gpu(handle, "nvmlDeviceGetPcieReplayCounter").pcie)
        return _supported(pcie.replay_count)

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        watts = self._gpu(handle, "nvmlDeviceGetPowerManagementLimit").power_limit_watts
        return round(_supported(watts) * 1000)

    def nvmlDeviceGetMaxClockInfo(self, handle, type):
        clocks = _supported(self._gpu(handle, "nvmlDeviceGetMaxClockInfo").clock_max_mhz)
        if type in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_GRAPHICS):
            return _supported(clocks.sm)
        if type == pynvml.NVML_CLOCK_MEM:
            return _supported(clocks.memory)
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        gpu = self._gpu(handle, "nvmlDeviceGetTemperature")
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._moved(_supported(gpu.temperature_celsius), self._motion.temperature_jitter_c)

    def nvmlDeviceGetPowerUsage(self, handle):
        watts = _supported(self._gpu(handle, "nvmlDeviceGetPowerUsage").sensors.power_draw_watts)
        return max(0, round(self._moved(watts, self._motion.power_jitter_watts) * 1000))  # mW

    def nvmlDeviceGetClockInfo(self, handle, type):
        sensors = self._gpu(handle, "nvmlDeviceGetClockInfo").sensors
        if type in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_GRAPHICS):
            return _supported(sensors.clock_sm_mhz)
        if type == pynvml.NVML_CLOCK_MEM:
            return _supported(sensors.clock_memory_mhz)
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._clock_events(handle, "nvmlDeviceGetCurrentClocksEventReasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        """The same mask under NVML's older name (deprecated, still in every driver)."""
        return self._clock_events(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")

    def _clock_events(self, handle: FakeHandle, function: str) -> int:
        reasons = _supported(self._gpu(handle, function).sensors.clock_event_reasons)
        mask = 0
        for reason in reasons:
            mask |= CLOCK_EVENT_REASONS[reason]
        return mask

    def nvmlDeviceGetUtilizationRates(self, handle):
        sensors = self._gpu(handle, "nvmlDeviceGetUtilizationRates").sensors
        return pynvml.c_nvmlUtilization_t(
            gpu=_supported(sensors.utilization_gpu_percent),
            memory=_supported(sensors.utilization_memory_percent),
        )

    def _moved(self, value: T, jitter: float) -> T:
        """`value` moved by up to +/- `jitter` (of its own type), or as is without jitter."""
        if not jitter:
            return value
        if isinstance(value, int):
            return type(value)(value + self._rng.randint(-int(jitter), int(jitter)))
        return type(value)(value + self._rng.uniform(-jitter, jitter))

    def nvmlDeviceGetGspFirmwareVersion(self, handle, version=None):
        gpu = self._gpu(handle, "nvmlDeviceGetGspFirmwareVersion")
        return _supported(gpu.gsp_firmware_version).encode()  # pynvml gives the C buffer's bytes

    def nvmlDeviceGetAddressingMode(self, device):
        mode = _supported(self._gpu(device, "nvmlDeviceGetAddressingMode").addressing_mode)
        return getattr(pynvml, f"NVML_DEVICE_ADDRESSING_MODE_{mode.upper()}")

    def nvmlDeviceGetC2cModeInfoV(self, handle):
        enabled = _supported(self._gpu(handle, "nvmlDeviceGetC2cModeInfoV").c2c_mode)
        return pynvml.c_nvmlC2cModeInfo_v1_t(isC2cEnabled=int(enabled))

    def nvmlDeviceGetGpuFabricInfoV(self, device, gpuFabricInfo):
        """Fills the struct behind `gpuFabricInfo` (a ctypes byref), as NVML does."""
        fabric = _supported(self._gpu(device, "nvmlDeviceGetGpuFabricInfoV").fabric)
        info = gpuFabricInfo._obj
        info.state = getattr(pynvml, f"NVML_GPU_FABRIC_STATE_{fabric.state.upper()}")
        info.status = pynvml.NVML_SUCCESS
        info.cliqueId = fabric.clique_id or 0
        if fabric.cluster_uuid:
            info.clusterUuid[:] = uuid.UUID(fabric.cluster_uuid).bytes
        if hasattr(info, "healthSummary"):  # v3 and later
            info.healthSummary = getattr(
                pynvml,
                f"NVML_GPU_FABRIC_HEALTH_SUMMARY_{(fabric.health or 'not_supported').upper()}",
            )
        return pynvml.NVML_SUCCESS

    # -- events ------------------------------------------------------------------------------

    def nvmlEventSetCreate(self):
        self._ready()
        return FakeEventSet(self._xids)

    def nvmlDeviceGetSupportedEventTypes(self, handle):
        self._gpu(handle, "nvmlDeviceGetSupportedEventTypes")
        return _SUPPORTED_EVENTS

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):
        self._gpu(handle, "nvmlDeviceRegisterEvents")
        if not isinstance(eventSet, FakeEventSet) or eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if eventTypes & ~_SUPPORTED_EVENTS:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        eventSet.gpus.add(handle.index)

    def nvmlEventSetWait_v2(self, eventSet, timeoutms):
        """The next XID due on a registered GPU; NVML's Timeout when none comes in time."""
        self._ready()
        if not isinstance(eventSet, FakeEventSet) or eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        xid = self._xids.take(eventSet.delivered, eventSet.gpus, timeoutms / 1000)
        if xid is None:
            raise _error(pynvml.NVML_ERROR_TIMEOUT)
        return EventData(FakeHandle(xid.gpu), pynvml.nvmlEventTypeXidCriticalError, xid.code)

    def nvmlEventSetFree(self, eventSet):
        if not isinstance(eventSet, FakeEventSet) or eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        eventSet.freed = True


def _supported(value: T | None) -> T:
    """`value`, or NVML's NotSupported when the profile has no such feature (null)."""
    if value is None:
        raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return value


def _state(enabled: bool) -> int:
    return pynvml.NVML_FEATURE_ENABLED if enabled else pynvml.NVML_FEATURE_DISABLED
