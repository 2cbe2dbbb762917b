"""Real captures as Plumb profiles: `nvidia-smi -q -x` XML and k8s-test-infra mock-NVML configs.

Each importer turns one format into profile data (the dict a profile YAML holds), which then
goes through the profile loader like any profile, so a replayed capture is served by the same
FakeNvml. A fact the capture carries comes through as written; a fact it does not carry is null
(NVML NotSupported), never a made-up value, and a capture has no host: the simulation reports
the host, CUDA runtime and NCCL facts as not_supported. GPUs are written as a template (what
they share) and per-index overrides (UUIDs, serials, bus ids), as a profile author would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from xml.etree.ElementTree import Element

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from plumb.agent.simulate import units
from plumb.agent.simulate.overlay import overlay
from plumb.agent.simulate.units import ValueProblem
from plumb.sensors import CLOCK_EVENT_REASONS

__all__ = [
    "NO_HOST",
    "CaptureError",
    "from_mock_nvml",
    "from_nvidia_smi_xml",
    "is_mock_nvml",
    "is_xml",
]

NO_HOST = "a capture carries no host, CUDA runtime or NCCL facts: they are not_supported"


class CaptureError(ValueError):
    """A capture that cannot be imported; the message names the GPU and the element."""


def is_xml(raw: bytes) -> bool:
    """True when `raw` is XML (an nvidia-smi capture), by content, not file name."""
    return raw.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n").startswith(b"<")


def is_mock_nvml(data: object) -> bool:
    """True for a mock-NVML config: a `system` block and device defaults or devices."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("system"), dict)
        and ("device_defaults" in data or "devices" in data)
    )


# -- nvidia-smi -q -x ------------------------------------------------------------------------


def from_nvidia_smi_xml(raw: bytes) -> dict[str, Any]:
    """Profile data for an `nvidia-smi -q -x` capture (layouts v10 to v13)."""
    try:
        # DTDs allowed (every capture names nvsmi_device_vNN.dtd, never fetched); entity
        # declarations and external references refused: a capture has none.
        root = SafeET.fromstring(raw, forbid_dtd=False)  # bytes: its encoding declaration holds
    except DefusedXmlException as exc:
        raise CaptureError(f"refused XML construct: {exc}") from exc
    except SafeET.ParseError as exc:
        raise CaptureError(f"invalid XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise CaptureError(f"root element is <{root.tag}>, not nvidia-smi's <nvidia_smi_log>")
    gpus = root.findall("gpu")
    if not gpus:
        raise CaptureError("no <gpu> element: the capture lists no GPU")
    driver = _Fields(root, "the capture")
    specs = [
        _xml_gpu(_Fields(gpu, f"gpu {i} ({gpu.get('id', '?')})")) for i, gpu in enumerate(gpus)
    ]
    description = (
        f"nvidia-smi capture of {len(gpus)}x {specs[0]['name']}, driver "
        f"{driver.required('driver_version')}; {NO_HOST}"
    )
    attached = root.findtext("attached_gpus")
    if attached and not units.is_missing(attached) and units.integer(attached) != len(gpus):
        # `nvidia-smi -q -x -i N` prints the node's count but only the GPUs asked for.
        description += f"; the node has {attached.strip()} GPUs, the capture describes {len(gpus)}"
    return {
        "description": description,
        "host": None,
        "driver": {
            "version": driver.required("driver_version"),
            "nvml_version": None,
            "cuda_driver_version": units.cuda_version(driver.required("cuda_version")),
        },
        "gpus": _compact(specs),
    }


class _Fields:
    """Typed reads from one element; a failed read becomes the NVML error the fake replays."""

    def __init__(self, elem: Element, where: str) -> None:
        self.elem, self.where = elem, where
        self.errors: dict[str, str] = {}

    def required(self, path: str) -> str:
        text = self.elem.findtext(path)
        if text is None or units.is_missing(text) or not text.strip():
            raise CaptureError(f"{self.where}: <{path}> is missing; every capture has it")
        return text.strip()

    def present(self, *paths: str) -> str | None:
        """The first of `paths` the layout has (layouts rename elements)."""
        return next((p for p in paths if self.elem.find(p) is not None), None)

    def read(self, path: str | None, parse: Callable[[str], Any], function: str) -> Any:
        """`parse` of the element's text; None when absent or N/A; an unread value records
        `function`'s NVML error."""
        text = None if path is None else self.elem.findtext(path)
        if text is None or units.is_missing(text):
            return None
        if failed := units.unread(text):
            self.errors[function] = failed.error
            return None
        try:
            return parse(text.strip())
        except ValueProblem as exc:
            raise CaptureError(f"{self.where}: <{path}>: {exc}") from exc

    def first(self, paths: tuple[str, ...], parse: Callable[[str], Any], function: str) -> Any:
        return self.read(self.present(*paths), parse, function)


def _text(value: str) -> str:
    return value


def _xml_gpu(f: _Fields) -> dict[str, Any]:
    mig_current = f.read("mig_mode/current_mig", units.enabled, "nvmlDeviceGetMigMode")
    mig_pending = f.read("mig_mode/pending_mig", units.enabled, "nvmlDeviceGetMigMode")
    link = "pci/pci_gpu_link_info"
    pcie = {
        "gen_current": f.read(f"{link}/pcie_gen/current_link_gen", units.integer, _PCIE[0]),
        "gen_max": f.read(f"{link}/pcie_gen/max_link_gen", units.integer, _PCIE[1]),
        "width_current": f.read(
            f"{link}/link_widths/current_link_width", units.link_width, _PCIE[2]
        ),
        "width_max": f.read(f"{link}/link_widths/max_link_width", units.link_width, _PCIE[3]),
        "replay_count": f.read("pci/replay_counter", units.integer, _PCIE[4]),
    }
    clocks = {
        "sm": f.read("max_clocks/sm_clock", _mhz, "nvmlDeviceGetMaxClockInfo"),
        "memory": f.read("max_clocks/mem_clock", _mhz, "nvmlDeviceGetMaxClockInfo"),
    }
    spec = {
        "name": f.required("product_name"),
        "uuid": f.required("uuid"),
        "pci_bus_id": units.bus_id(f.elem.findtext("pci/pci_bus_id") or f.elem.get("id") or ""),
        "pci_device_id": f.read("pci/pci_device_id", units.pci_device_id, "nvmlDeviceGetPciInfo"),
        "architecture": f.read(
            "product_architecture", units.architecture, "nvmlDeviceGetArchitecture"
        ),
        "compute_capability": None,  # nvidia-smi -q does not print it
        "memory_total_mib": f.read(
            "fb_memory_usage/total", units.mebibytes, "nvmlDeviceGetMemoryInfo"
        ),
        "vbios_version": f.read("vbios_version", _text, "nvmlDeviceGetVbiosVersion"),
        "inforom_version": f.read(
            "inforom_version/img_version", _text, "nvmlDeviceGetInforomImageVersion"
        ),
        "serial": f.read("serial", _text, "nvmlDeviceGetSerial"),  # explicit null: NotSupported
        "persistence_mode": f.read(
            "persistence_mode", units.enabled, "nvmlDeviceGetPersistenceMode"
        ),
        "mig": None
        if mig_current is None
        else {
            "current": mig_current,
            "pending": mig_current if mig_pending is None else mig_pending,
        },
        "ecc": _xml_ecc(f),
        "retired_pages_pending": f.first(
            ("retired_pages/pending_retirement", "retired_pages/pending_blacklist"),
            units.yes_no,
            "nvmlDeviceGetRetiredPagesPendingStatus",
        ),
        "remapped_rows": _xml_remapped_rows(f),
        "pcie": pcie if any(v is not None for v in pcie.values()) else None,
        "nvlink": None,  # nvidia-smi -q does not list NVLinks (`nvidia-smi nvlink -s` does)
        "power_limit_watts": f.first(
            (
                "gpu_power_readings/requested_power_limit",  # v12+: the limit software set
                "power_readings/requested_power_limit",
                "power_readings/power_limit",  # up to v11: the same limit under its old name
                "gpu_power_readings/current_power_limit",
            ),
            lambda t: units.quantity(t, "W"),
            "nvmlDeviceGetPowerManagementLimit",
        ),
        "clock_max_mhz": clocks if any(v is not None for v in clocks.values()) else None,
        "temperature_celsius": f.read(
            "temperature/gpu_temp",
            lambda t: int(units.quantity(t, "C")),
            "nvmlDeviceGetTemperature",
        ),
        "gsp_firmware_version": f.read(
            "gsp_firmware_version", _text, "nvmlDeviceGetGspFirmwareVersion"
        ),
        "addressing_mode": f.read("addressing_mode", _addressing, "nvmlDeviceGetAddressingMode"),
        "c2c_mode": f.read("c2c_mode", units.enabled, "nvmlDeviceGetC2cModeInfoV"),
        "fabric": _xml_fabric(f),
        "sensors": _xml_sensors(f),
    }
    spec["errors"] = f.errors
    return spec


_PCIE = (
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieReplayCounter",
)


def _xml_sensors(f: _Fields) -> dict[str, Any]:
    """What the GPU's sensors read when the capture was taken (replayed as at rest)."""
    return {
        "power_draw_watts": f.first(
            (
                "gpu_power_readings/instant_power_draw",  # v12+: the instant reading
                "gpu_power_readings/power_draw",
                "power_readings/power_draw",  # up to v11
            ),
            lambda t: units.quantity(t, "W"),
            "nvmlDeviceGetPowerUsage",
        ),
        "clock_sm_mhz": f.read("clocks/sm_clock", _mhz, "nvmlDeviceGetClockInfo"),
        "clock_memory_mhz": f.read("clocks/mem_clock", _mhz, "nvmlDeviceGetClockInfo"),
        "utilization_gpu_percent": f.read(
            "utilization/gpu_util", _percent, "nvmlDeviceGetUtilizationRates"
        ),
        "utilization_memory_percent": f.read(
            "utilization/memory_util", _percent, "nvmlDeviceGetUtilizationRates"
        ),
        "clock_event_reasons": _xml_clock_events(f),
    }


def _xml_clock_events(f: _Fields) -> list[str] | None:
    """The active reasons of CLOCK_EVENT_REASONS (v12+: `clocks_event_reasons`; up to v11:
    `clocks_throttle_reasons`, the same elements under the older name); None without either."""
    for block, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        if f.elem.find(block) is None:
            continue
        read = {
            reason: f.read(
                f"{block}/{prefix}{reason}", units.active, "nvmlDeviceGetCurrentClocksEventReasons"
            )
            for reason in CLOCK_EVENT_REASONS
        }
        if all(v is None for v in read.values()):
            return None
        return [reason for reason, on in read.items() if on]
    return None


def _percent(text: str) -> int:
    return int(units.quantity(text, "%"))


def _mhz(text: str) -> int:
    return int(units.quantity(text, "MHz"))


def _addressing(text: str) -> str:
    mode = units.token(text)
    if mode not in ("none", "hmm", "ats"):
        raise ValueProblem(f"{text!r} is not an addressing mode (None, HMM, ATS)")
    return mode


def _xml_ecc(f: _Fields) -> dict[str, Any] | None:
    mode = f.read("ecc_mode/current_ecc", units.enabled, "nvmlDeviceGetEccMode")
    if mode is None:
        return None
    if not mode:
        return {"enabled": False}
    return {
        "enabled": True,
        "uncorrected_volatile": _uncorrected(f, "volatile"),
        "uncorrected_aggregate": _uncorrected(f, "aggregate"),
        "corrected_volatile": _corrected(f, "volatile"),
        "corrected_aggregate": _corrected(f, "aggregate"),
    }


def _uncorrected(f: _Fields, counter: str) -> int | None:
    """NVML's uncorrected total for `counter`: the sum of every uncorrectable location (v12+:
    `dram_uncorrectable`, `sram_uncorrectable[_parity|_secded]`; up to v11: `double_bit/total`)."""
    block = f.elem.find(f"ecc_errors/{counter}")
    if block is None:
        return None
    if block.find("double_bit/total") is not None:
        return f.read(f"ecc_errors/{counter}/double_bit/total", units.integer, _ECC_COUNTS)
    counts = [
        f.read(f"ecc_errors/{counter}/{child.tag}", units.integer, _ECC_COUNTS)
        for child in block
        if "uncorrectable" in child.tag
    ]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _corrected(f: _Fields, counter: str) -> int | None:
    """NVML's corrected total for `counter`: the sum of every correctable location (v12+:
    `sram_correctable`, `dram_correctable`; up to v11: `single_bit/total`)."""
    block = f.elem.find(f"ecc_errors/{counter}")
    if block is None:
        return None
    if block.find("single_bit/total") is not None:
        return f.read(f"ecc_errors/{counter}/single_bit/total", units.integer, _ECC_COUNTS)
    counts = [
        f.read(f"ecc_errors/{counter}/{child.tag}", units.integer, _ECC_COUNTS)
        for child in block
        if child.tag.endswith("_correctable") and "uncorrectable" not in child.tag
    ]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


_ECC_COUNTS = "nvmlDeviceGetTotalEccErrors"


def _xml_remapped_rows(f: _Fields) -> dict[str, Any] | None:
    if f.elem.find("remapped_rows/remapped_row_corr") is None:
        return None  # `<remapped_rows>N/A</remapped_rows>`, or a layout without them
    function = "nvmlDeviceGetRemappedRows"
    rows = {
        "correctable": f.read("remapped_rows/remapped_row_corr", units.integer, function),
        "uncorrectable": f.read("remapped_rows/remapped_row_unc", units.integer, function),
        "pending": f.read("remapped_rows/remapped_row_pending", units.yes_no, function),
        "failed": f.read("remapped_rows/remapped_row_failure", units.yes_no, function),
    }
    return None if any(v is None for v in rows.values()) else rows


def _xml_fabric(f: _Fields) -> dict[str, Any] | None:
    function = "nvmlDeviceGetGpuFabricInfoV"
    state = f.read("fabric/state", units.token, function)
    if state is None or state == "not_supported":
        return None
    return {
        "state": state,
        "clique_id": f.read("fabric/cliqueId", units.integer, function),
        "cluster_uuid": f.read("fabric/clusterUuid", _text, function),
        "health": f.read("fabric/health/summary", units.token, function),
    }


# -- mock-NVML config ------------------------------------------------------------------------


def from_mock_nvml(config: dict[str, Any]) -> dict[str, Any]:
    """Profile data for a k8s-test-infra mock-NVML config (`system`, `device_defaults`,
    `devices`, `nvlink`): each device is the defaults with its own entry merged over them."""
    system = config["system"]
    devices = config.get("devices") or []
    if not isinstance(devices, list) or not devices:
        raise CaptureError("`devices` lists no GPU")
    defaults = config.get("device_defaults") or {}
    nvlink = config.get("nvlink") or {}
    specs = [
        _mock_gpu(_Values(overlay(defaults, device), f"devices[{i}]"), nvlink)
        for i, device in enumerate(devices)
    ]
    where = _Values(system, "system")
    driver_version = where.required("driver_version")
    return {
        "description": (
            f"mock-NVML config of {len(specs)}x {specs[0]['name']}, driver {driver_version}; "
            f"{NO_HOST}"
        ),
        "host": None,
        "driver": {
            "version": driver_version,
            "nvml_version": where.get("nvml_version", str),
            "cuda_driver_version": units.cuda_version(where.required("cuda_version")),
        },
        "gpus": _compact(specs),
    }


class _Values:
    """Typed reads from a mock-NVML mapping by dotted key; absent or "N/A" is None."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def raw(self, key: str) -> Any:
        value: Any = self.data
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return None if units.is_missing(value) else value

    def get(self, key: str, parse: Callable[[Any], Any]) -> Any:
        value = self.raw(key)
        if value is None:
            return None
        try:
            return parse(value)
        except (ValueProblem, TypeError, ValueError) as exc:
            raise CaptureError(f"{self.where}.{key}: {exc}") from exc

    def required(self, key: str) -> str:
        value = self.raw(key)
        if value is None:
            raise CaptureError(f"{self.where}.{key} is missing")
        return str(value)


def _mock_gpu(v: _Values, nvlink: dict[str, Any]) -> dict[str, Any]:
    major, minor = v.raw("compute_capability.major"), v.raw("compute_capability.minor")
    links = units.integer(nvlink.get("links_per_gpu") or 0)
    ecc = v.get("ecc.mode_current", units.enabled)
    rows = {
        "correctable": v.get("remapped_rows.correctable", units.integer),
        "uncorrectable": v.get("remapped_rows.uncorrectable", units.integer),
        "pending": v.get("remapped_rows.pending", units.yes_no),
        "failed": v.get("remapped_rows.failure_occurred", units.yes_no),
    }
    gsp = v.get("gsp_firmware.mode", units.enabled)
    fabric_state = v.get("fabric.state", units.token)
    power_mw = v.get("power.limit_mw", units.integer) or v.get(
        "power.default_limit_mw", units.integer
    )
    draw_mw = v.get("power.current_draw_mw", units.integer)
    memory_bytes = v.get("memory.total_bytes", units.integer)
    return {
        "name": v.required("name"),
        "uuid": v.required("uuid"),
        "pci_bus_id": v.get("pci.bus_id", units.bus_id) or v.required("pci.bus_id"),
        "pci_device_id": v.get("pci.device_id", units.pci_device_id),
        "architecture": v.get("architecture", units.architecture),
        "compute_capability": None if major is None or minor is None else f"{major}.{minor}",
        "memory_total_mib": None if memory_bytes is None else memory_bytes >> 20,
        "vbios_version": v.get("vbios_version", str),
        "inforom_version": v.get("inforom.image_version", str),
        "serial": v.get("serial", str),
        "persistence_mode": v.get("persistence_mode", units.enabled),
        "mig": None
        if v.raw("mig.mode_current") is None
        else {
            "current": v.get("mig.mode_current", units.enabled),
            "pending": v.get("mig.mode_pending", units.enabled)
            if v.raw("mig.mode_pending") is not None
            else v.get("mig.mode_current", units.enabled),
        },
        "ecc": None
        if ecc is None
        else {"enabled": False}
        if not ecc
        else {
            "enabled": True,
            "uncorrected_volatile": v.get("ecc.errors.volatile.double_bit.total", units.integer),
            "uncorrected_aggregate": v.get("ecc.errors.aggregate.double_bit.total", units.integer),
            "corrected_volatile": v.get("ecc.errors.volatile.single_bit.total", units.integer),
            "corrected_aggregate": v.get("ecc.errors.aggregate.single_bit.total", units.integer),
        },
        "retired_pages_pending": v.get("retired_pages.pending_retirement", units.yes_no),
        "remapped_rows": None if any(x is None for x in rows.values()) else rows,
        "pcie": {
            "gen_current": v.get("pcie.current_link_gen", units.integer),
            "gen_max": v.get("pcie.max_link_gen", units.integer),
            "width_current": v.get("pcie.current_link_width", units.link_width),
            "width_max": v.get("pcie.max_link_width", units.link_width),
            "replay_count": v.get("pcie.replay_counter", units.integer),
        },
        # links_per_gpu declares the NVLink hardware; the mock brings links up only towards
        # declared NVSwitches (or explicit peers, which these configs do not list).
        # The configs hold no NVLink error counters: they replay as NotSupported.
        "nvlink": {
            "links_total": links,
            "links_up": links if nvlink.get("switches") else 0,
            "link_errors": None,
        }
        if links
        else None,
        "power_limit_watts": None if power_mw is None else power_mw / 1000,
        "clock_max_mhz": {
            "sm": v.get("clocks.sm_max", units.integer),
            "memory": v.get("clocks.memory_max", units.integer),
        },
        "temperature_celsius": v.get("thermal.temperature_gpu_c", units.integer),
        "sensors": {
            "power_draw_watts": None if draw_mw is None else draw_mw / 1000,
            "clock_sm_mhz": v.get("clocks.sm_current", units.integer),
            "clock_memory_mhz": v.get("clocks.memory_current", units.integer),
            "utilization_gpu_percent": v.get("utilization.gpu", units.integer),
            "utilization_memory_percent": v.get("utilization.memory", units.integer),
            "clock_event_reasons": _mock_clock_events(v),
        },
        "gsp_firmware_version": v.get("gsp_firmware.version", str) if gsp else None,
        "addressing_mode": v.get("addressing_mode", _addressing),
        # The mock answers NotSupported for C2C unless nvlink.c2c_enabled is true.
        "c2c_mode": True if nvlink.get("c2c_enabled") is True else None,
        "fabric": None
        if fabric_state is None
        else {
            # "auto" follows the mock's fake fabric manager, and is "completed" without one,
            # as in a replay.
            "state": "completed" if fabric_state == "auto" else fabric_state,
            "clique_id": v.get("fabric.clique_id", units.integer),
            "cluster_uuid": v.get("fabric.cluster_uuid", str),
            # The mock's fabric is healthy unless its config says otherwise.
            "health": v.get("fabric.health.summary", units.token) or "healthy",
        },
    }


def _mock_clock_events(v: _Values) -> list[str] | None:
    """The reasons `clocks_throttle_reasons` sets true; None where the config has none."""
    if v.raw("clocks_throttle_reasons") is None:
        return None
    return [r for r in CLOCK_EVENT_REASONS if v.get(f"clocks_throttle_reasons.{r}", units.active)]


# -- shared ----------------------------------------------------------------------------------


def _compact(specs: list[dict[str, Any]]) -> dict[str, Any]:
    """`gpus` as a profile writes it: what every GPU shares in the template, the rest (UUIDs,
    serials, bus ids) as per-index overrides."""
    shared = {
        key: value for key, value in specs[0].items() if all(s.get(key) == value for s in specs)
    }
    overrides = {
        i: {key: value for key, value in spec.items() if key not in shared}
        for i, spec in enumerate(specs)
    }
    out: dict[str, Any] = {"count": len(specs), "template": shared}
    if any(overrides.values()):
        out["overrides"] = {i: over for i, over in overrides.items() if over}
    return out
