"""Simulated-node profiles: the YAML schema and its loader.

A profile describes one kind of GPU node (hardware, driver, host, libraries) compactly: the
GPUs are a `template` repeated `count` times with per-index `overrides`, so a test can make one
GPU sick without copying the rest. Every model forbids unknown keys, so a typo is an error that
names the field rather than a silently ignored setting.
"""

from __future__ import annotations

import uuid
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import pynvml
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from plumb.agent.collect.kernel import SYSCTLS
from plumb.agent.collect.systemd import UNIT_DIRS, UNITS
from plumb.agent.simulate import capture
from plumb.agent.simulate.overlay import overlay
from plumb.sensors import CLOCK_EVENT_REASONS

__all__ = [
    "GpuSensorSpec",
    "GpuSpec",
    "Profile",
    "XidSpec",
    "ProfileError",
    "SensorMotion",
    "load_profile",
    "profile_data",
    "read_profile",
    "shipped_profiles",
    "validate_profile",
]


class ProfileError(Exception):
    """A profile that cannot be used; the message names the file and the failing field."""


def _host_path(value: str) -> str:
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts:
        raise ValueError("must be an absolute path without '..'")
    return str(path)


def _architecture(value: str) -> str:
    if not hasattr(pynvml, f"NVML_DEVICE_ARCH_{value.upper()}") or value != value.lower():
        raise ValueError("not an NVML architecture name (e.g. ampere, hopper, blackwell, ada)")
    return value


def _nvml_function(value: str) -> str:
    if not value.startswith("nvmlDevice") or not callable(getattr(pynvml, value, None)):
        raise ValueError("not a pynvml nvmlDevice* function")
    return value


def _nvml_error(value: str) -> str:
    if not isinstance(getattr(pynvml, f"NVML_ERROR_{value}", None), int):
        raise ValueError("not an NVML error name (e.g. GPU_IS_LOST, UNKNOWN, TIMEOUT)")
    return value


def _clock_event_reason(value: str) -> str:
    if value not in CLOCK_EVENT_REASONS:
        raise ValueError(f"not a clock-event reason ({', '.join(CLOCK_EVENT_REASONS)})")
    return value


def _uuid(value: str) -> str:
    uuid.UUID(value)  # raises ValueError naming the problem
    return value


_BUS_ID = r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$"  # NVML's form: 00000000:18:00.0
HostPath = Annotated[str, AfterValidator(_host_path)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OsRelease(_Model):
    ID: str
    VERSION_ID: str
    PRETTY_NAME: str


class Cloud(_Model):
    provider: str
    instance_type: str
    region: str
    zone: str


def _sysctl_name(value: str) -> str:
    if value not in SYSCTLS:
        raise ValueError(f"not in the agent's sysctl subset ({', '.join(SYSCTLS)})")
    return value


def _unit_name(value: str) -> str:
    if value not in UNITS:
        raise ValueError(f"not a unit the agent reads ({', '.join(UNITS)})")
    return value


class SystemdUnitSpec(_Model):
    """A unit as its files show it; an absent unit has no entry (no unit file on the host)."""

    fragment_path: HostPath  # where the unit file lies ("/usr/lib/systemd/system/...")
    enabled: bool = True  # linked from multi-user.target.wants, as `systemctl enable` does
    running: bool = True  # its cgroup holds a process
    package: str | None = None  # the dpkg package shipping it; default the unit's usual one
    package_version: str | None = None  # dpkg's form ("1.7.12-0ubuntu2~22.04.1"); null: none


class HostSpec(_Model):
    kernel: str
    architecture: Literal["x86_64", "aarch64"]
    os_release: OsRelease
    container_runtime: str
    container_runtime_version: str
    kubelet_version: str
    cloud: Cloud | None = None
    boot_id: str | None = None  # derived from the node name when absent
    kernel_cmdline: str | None = None  # /proc/cmdline; absent: not_supported
    # Loaded modules besides the NVIDIA ones (driver.modules adds those); absent: no /proc/modules.
    kernel_modules: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$")]] | None = None
    sysctl: dict[Annotated[str, AfterValidator(_sysctl_name)], str] = {}  # vm.swappiness: "1"
    systemd_units: dict[Annotated[str, AfterValidator(_unit_name)], SystemdUnitSpec] = {}

    @model_validator(mode="after")
    def _units_findable(self) -> HostSpec:
        """Each unit where the agent looks for it: on systemd's search path, in a known package."""
        for unit, spec in self.systemd_units.items():
            where = PurePosixPath(spec.fragment_path)
            if where.name != unit or str(where.parent).lstrip("/") not in UNIT_DIRS:
                dirs = ", ".join(f"/{d}" for d in UNIT_DIRS)
                raise ValueError(f"systemd_units.{unit}.fragment_path: must be {unit} in {dirs}")
            if spec.package is not None and spec.package not in UNITS[unit]:
                raise ValueError(
                    f"systemd_units.{unit}.package: the agent looks for {', '.join(UNITS[unit])}"
                )
        return self


class DriverSpec(_Model):
    loaded: bool = True  # false: nvmlInit fails with DriverNotLoaded and no module is present
    version: str
    nvml_version: str | None  # null: not known (an nvidia-smi capture does not print it)
    cuda_driver_version: Annotated[int, Field(ge=1000)]  # NVML's form: 12040 is CUDA 12.4
    # Host-side facts: materialised as module files, so only meaningful with a `host`.
    kernel_module_flavour: Literal["open", "proprietary"] | None = None
    fabric_manager_version: str | None = None  # only on NVSwitch systems
    # The loaded module's version; default `version`. Set it apart from `version` to simulate an
    # upgrade without a reboot (the library is new, the module still the old one).
    kernel_module_version: str | None = None
    # Loaded NVIDIA modules -> their parameters (/sys/module/<name>/parameters/<param>: value).
    modules: dict[
        Annotated[str, Field(pattern=r"^nvidia[a-z_]*$")],
        dict[Annotated[str, Field(pattern=r"^\w+$")], str],
    ] = {"nvidia": {}}

    @model_validator(mode="after")
    def _nvidia_loaded(self) -> DriverSpec:
        if self.loaded and "nvidia" not in self.modules:
            raise ValueError("modules: a loaded driver has the nvidia module; list it")
        return self


class CudaSpec(_Model):
    toolkit_version: str | None = None
    runtimes: dict[HostPath, str] = {}  # libcudart path -> runtime version ("12.4")


class MigSpec(_Model):
    current: bool = False
    pending: bool = False


class EccSpec(_Model):
    enabled: bool = True
    uncorrected_volatile: NonNegativeInt | None = 0  # null: the count is not known
    uncorrected_aggregate: NonNegativeInt | None = 0
    # Correctable (single-bit) counts: sensor readings, not facts (they climb on healthy HBM).
    corrected_volatile: NonNegativeInt | None = 0
    corrected_aggregate: NonNegativeInt | None = 0


class RemappedRowsSpec(_Model):
    correctable: NonNegativeInt = 0
    uncorrectable: NonNegativeInt = 0
    pending: bool = False
    failed: bool = False


class PcieSpec(_Model):
    gen_current: PositiveInt | None
    gen_max: PositiveInt | None
    width_current: PositiveInt | None
    width_max: PositiveInt | None
    # nvmlDeviceGetPcieReplayCounter: a sensor reading (it climbs on links that work).
    replay_count: Annotated[int, Field(ge=0, lt=1 << 32)] | None = 0


class NvlinkErrorsSpec(_Model):
    """One link's nvmlDeviceGetNvLinkErrorCounter values (sensor readings, not facts)."""

    replay: NonNegativeInt = 0
    recovery: NonNegativeInt = 0
    crc_flit: NonNegativeInt = 0


class NvlinkSpec(_Model):
    links_total: Annotated[int, Field(gt=0, le=pynvml.NVML_NVLINK_MAX_LINKS)]
    links_up: NonNegativeInt
    # Error counters by link index; a link not listed counts none; null: NotSupported.
    link_errors: dict[NonNegativeInt, NvlinkErrorsSpec] | None = {}

    @model_validator(mode="after")
    def _up_within_total(self) -> NvlinkSpec:
        if self.links_up > self.links_total:
            raise ValueError("links_up exceeds links_total")
        for link in self.link_errors or {}:
            if link >= self.links_total:
                raise ValueError(
                    f"link_errors.{link}: no such link (links_total is {self.links_total})"
                )
        return self


class ClockSpec(_Model):
    sm: PositiveInt | None
    memory: PositiveInt | None


class FabricSpec(_Model):
    """NVLink fabric registration, as nvmlDeviceGetGpuFabricInfoV reports it."""

    state: Literal["not_started", "in_progress", "completed"]
    clique_id: NonNegativeInt | None = None
    cluster_uuid: Annotated[str, AfterValidator(_uuid)] | None = None
    health: Literal["healthy", "unhealthy", "limited_capacity"] | None = None


class GpuSensorSpec(_Model):
    """What the GPU's sensors read at rest (an idle, persistence-mode GPU); null: NotSupported.

    Readings, not facts: the stream sends them apart and never diffs them."""

    power_draw_watts: Annotated[float, Field(ge=0)] | None = 60.0
    clock_sm_mhz: PositiveInt | None = 345
    clock_memory_mhz: PositiveInt | None = 1593
    utilization_gpu_percent: Annotated[int, Field(ge=0, le=100)] | None = 0
    utilization_memory_percent: Annotated[int, Field(ge=0, le=100)] | None = 0
    # Why the clocks are below their maximum (plumb.sensors.CLOCK_EVENT_REASONS): an idle GPU
    # clocks down, as every capture at rest shows.
    clock_event_reasons: list[Annotated[str, AfterValidator(_clock_event_reason)]] | None = [
        "gpu_idle"
    ]


class SensorMotion(_Model):
    """How much the node's readings move between reads, so the bench and the demo see churn:
    each read draws uniformly within +/- these of the GPU's resting value."""

    temperature_jitter_c: NonNegativeInt = 0
    power_jitter_watts: Annotated[float, Field(ge=0)] = 0.0


class GpuSpec(_Model):
    """One GPU as NVML would describe it; a null section means NVML says NotSupported."""

    name: str
    pci_device_id: Annotated[int, Field(ge=0, le=0xFFFF)]
    architecture: Annotated[str, AfterValidator(_architecture)] | None
    compute_capability: Annotated[str, Field(pattern=r"^\d+\.\d+$")] | None
    memory_total_mib: PositiveInt | None
    vbios_version: str | None
    inforom_version: str | None
    uuid: str | None = None  # derived from node name and index when absent
    pci_bus_id: Annotated[str, Field(pattern=_BUS_ID)] | None = None  # derived when absent
    serial: str | None = None  # derived when absent; an explicit null means NotSupported
    persistence_mode: bool | None = True
    mig: MigSpec | None = None
    ecc: EccSpec | None = None
    retired_pages_pending: bool | None = False
    remapped_rows: RemappedRowsSpec | None = RemappedRowsSpec()
    pcie: PcieSpec | None
    nvlink: NvlinkSpec | None = None
    power_limit_watts: PositiveFloat | None
    clock_max_mhz: ClockSpec | None
    # A sensor reading (the resting temperature): sent as GpuSensors, never as a fact.
    temperature_celsius: int | None
    sensors: GpuSensorSpec = GpuSensorSpec()
    gsp_firmware_version: str | None = None
    addressing_mode: Literal["none", "hmm", "ats"] | None = None
    c2c_mode: bool | None = None  # null: no NVLink-C2C (NVML says NotSupported)
    fabric: FabricSpec | None = None
    # NVML calls that fail on this GPU: function name -> NVML error name (NVML_ERROR_<name>).
    errors: dict[
        Annotated[str, AfterValidator(_nvml_function)],
        Annotated[str, AfterValidator(_nvml_error)],
    ] = {}


class Gpus(_Model):
    count: Annotated[int, Field(gt=0, le=16)]  # no node has more; keeps derived bus ids distinct
    template: dict[str, Any]
    overrides: dict[NonNegativeInt, dict[str, Any]] = {}


class XidSpec(_Model):
    """An XID the simulated driver reports on GPU `gpu`, `after_s` seconds after the node
    started; one added by editing a running node's profile with a past `after_s` comes at once."""

    gpu: NonNegativeInt
    code: Annotated[int, Field(ge=1, le=65535)]  # 79: fallen off the bus
    after_s: NonNegativeFloat = 0.0


class Profile(_Model):
    """A simulated node: what its host, driver, libraries and GPUs report."""

    description: str
    host: HostSpec | None  # null: nothing is known of the host (a replayed capture)
    driver: DriverSpec
    cuda: CudaSpec = CudaSpec()
    nccl: dict[HostPath, str] = {}  # libnccl path -> version ("2.21.5")
    gpus: Gpus
    sensors: SensorMotion = SensorMotion()
    # What this node's benchmarks measure, by check id (e.g. nccl-allreduce: 120.0 GB/s),
    # reported as simulated; a benchmark absent here is skipped as `simulated node`.
    benchmarks: dict[
        Literal[
            "matmul-bf16",
            "matmul-fp16",
            "memory-bandwidth",
            "host-device-bandwidth",
            "nccl-allreduce",
        ],
        PositiveFloat,
    ] = {}
    # XIDs the fake NVML delivers as events, each once (recipes/knowledge/xids.yaml: codes).
    xids: Annotated[list[XidSpec], Field(max_length=256)] = []

    @model_validator(mode="after")
    def _module_files_need_a_flavour(self) -> Profile:
        if self.host is not None and self.driver.loaded and not self.driver.kernel_module_flavour:
            raise ValueError("driver.kernel_module_flavour is required with a host")
        return self

    def gpu_spec(self, index: int) -> GpuSpec:
        """GPU `index`: the template with that index's overrides merged in, validated."""
        return GpuSpec.model_validate(
            overlay(self.gpus.template, self.gpus.overrides.get(index, {}))
        )

    def gpu_specs(self) -> list[GpuSpec]:
        """Every GPU's spec, in index order."""
        return [self.gpu_spec(i) for i in range(self.gpus.count)]


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped with the agent (usable as `--simulate NAME`)."""
    root = resources.files("plumb.agent.simulate.profiles")
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def profile_path(name_or_path: str) -> Path:
    """The file for a shipped profile name, or the given path when it is one."""
    if name_or_path in shipped_profiles():
        return Path(str(resources.files("plumb.agent.simulate.profiles") / f"{name_or_path}.yaml"))
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists() or "/" in name_or_path:
        return path
    raise ProfileError(
        f"unknown profile {name_or_path!r}: shipped profiles are {', '.join(shipped_profiles())}"
    )


def load_profile(name_or_path: str) -> Profile:
    """Load and validate a profile by shipped name or path; raises ProfileError."""
    return read_profile(profile_path(name_or_path))


# The largest file read as a profile or capture: an 8-GPU B200 `nvidia-smi -q -x` is 0.35 MiB,
# so 8 MiB holds any node's capture with room, and a wrong file fails fast.
MAX_FILE_BYTES = 8 << 20


def read_profile(path: Path) -> Profile:
    """Load and validate the profile in `path`, GPU overrides included; raises ProfileError.

    The file is a Plumb profile, an `nvidia-smi -q -x` capture or a mock-NVML config, told
    apart by content (see `profile_data`)."""
    return validate_profile(profile_data(path), path)


def profile_data(path: Path) -> dict[str, Any]:
    """The profile data in `path`: a profile's YAML as written, or a capture imported."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ProfileError(
            f"profile {path}: cannot read ({exc.strerror or exc}); "
            f"shipped profiles are {', '.join(shipped_profiles())}"
        ) from exc
    if len(raw) > MAX_FILE_BYTES:
        raise ProfileError(
            f"profile {path}: larger than {MAX_FILE_BYTES >> 20} MiB; not a profile or capture"
        )
    try:
        if capture.is_xml(raw):
            return capture.from_nvidia_smi_xml(raw)
        data = yaml.safe_load(raw.decode("utf-8"))
        return capture.from_mock_nvml(data) if capture.is_mock_nvml(data) else data
    except UnicodeDecodeError as exc:
        raise ProfileError(
            f"profile {path}: not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8"
        ) from exc
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile {path}: invalid YAML: {exc}") from exc
    except capture.CaptureError as exc:
        raise ProfileError(f"capture {path}: {exc}") from exc


def validate_profile(data: Any, path: Path) -> Profile:
    """`data` as a Profile, every GPU's merged spec checked; raises ProfileError naming `path`."""
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(f"profile {path}: {_describe(exc)}") from exc
    for index in profile.gpus.overrides:
        if index >= profile.gpus.count:
            raise ProfileError(
                f"profile {path}: gpus.overrides.{index}: no such GPU (count is "
                f"{profile.gpus.count})"
            )
    for i, xid in enumerate(profile.xids):
        if xid.gpu >= profile.gpus.count:
            raise ProfileError(
                f"profile {path}: xids.{i}.gpu: no GPU {xid.gpu} (count is {profile.gpus.count})"
            )
    for index in range(profile.gpus.count):
        where = "template" if index not in profile.gpus.overrides else f"overrides.{index}"
        try:
            profile.gpu_spec(index)
        except ValidationError as exc:
            raise ProfileError(f"profile {path}: {_describe(exc, ('gpus', where))}") from exc
    return profile


def _describe(exc: ValidationError, prefix: tuple[str, ...] = ()) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in (*prefix, *err['loc'])) or '(top level)'}: {err['msg']}"
        for err in exc.errors()
    )
