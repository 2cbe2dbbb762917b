from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FactStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FACT_STATUS_UNSPECIFIED: _ClassVar[FactStatus]
    FACT_STATUS_OK: _ClassVar[FactStatus]
    FACT_STATUS_NOT_SUPPORTED: _ClassVar[FactStatus]
    FACT_STATUS_ERROR: _ClassVar[FactStatus]
FACT_STATUS_UNSPECIFIED: FactStatus
FACT_STATUS_OK: FactStatus
FACT_STATUS_NOT_SUPPORTED: FactStatus
FACT_STATUS_ERROR: FactStatus

class StringFact(_message.Message):
    __slots__ = ("status", "value", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: FactStatus
    value: str
    error: str
    def __init__(self, status: _Optional[_Union[FactStatus, str]] = ..., value: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class Int64Fact(_message.Message):
    __slots__ = ("status", "value", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: FactStatus
    value: int
    error: str
    def __init__(self, status: _Optional[_Union[FactStatus, str]] = ..., value: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class DoubleFact(_message.Message):
    __slots__ = ("status", "value", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: FactStatus
    value: float
    error: str
    def __init__(self, status: _Optional[_Union[FactStatus, str]] = ..., value: _Optional[float] = ..., error: _Optional[str] = ...) -> None: ...

class BoolFact(_message.Message):
    __slots__ = ("status", "value", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: FactStatus
    value: bool
    error: str
    def __init__(self, status: _Optional[_Union[FactStatus, str]] = ..., value: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class Fact(_message.Message):
    __slots__ = ("status", "string_value", "int_value", "double_value", "bool_value", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: FactStatus
    string_value: str
    int_value: int
    double_value: float
    bool_value: bool
    error: str
    def __init__(self, status: _Optional[_Union[FactStatus, str]] = ..., string_value: _Optional[str] = ..., int_value: _Optional[int] = ..., double_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class HostFacts(_message.Message):
    __slots__ = ("hostname", "boot_id", "kernel", "architecture", "os_id", "os_version_id", "os_pretty_name", "container_runtime", "container_runtime_version", "kubelet_version", "cloud_provider", "instance_type", "region", "zone", "kernel_cmdline", "kernel_modules", "sysctls", "systemd_units")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    OS_ID_FIELD_NUMBER: _ClassVar[int]
    OS_VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OS_PRETTY_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    KUBELET_VERSION_FIELD_NUMBER: _ClassVar[int]
    CLOUD_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_CMDLINE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_MODULES_FIELD_NUMBER: _ClassVar[int]
    SYSCTLS_FIELD_NUMBER: _ClassVar[int]
    SYSTEMD_UNITS_FIELD_NUMBER: _ClassVar[int]
    hostname: StringFact
    boot_id: StringFact
    kernel: StringFact
    architecture: StringFact
    os_id: StringFact
    os_version_id: StringFact
    os_pretty_name: StringFact
    container_runtime: StringFact
    container_runtime_version: StringFact
    kubelet_version: StringFact
    cloud_provider: StringFact
    instance_type: StringFact
    region: StringFact
    zone: StringFact
    kernel_cmdline: StringFact
    kernel_modules: StringFact
    sysctls: _containers.RepeatedCompositeFieldContainer[Sysctl]
    systemd_units: _containers.RepeatedCompositeFieldContainer[SystemdUnit]
    def __init__(self, hostname: _Optional[_Union[StringFact, _Mapping]] = ..., boot_id: _Optional[_Union[StringFact, _Mapping]] = ..., kernel: _Optional[_Union[StringFact, _Mapping]] = ..., architecture: _Optional[_Union[StringFact, _Mapping]] = ..., os_id: _Optional[_Union[StringFact, _Mapping]] = ..., os_version_id: _Optional[_Union[StringFact, _Mapping]] = ..., os_pretty_name: _Optional[_Union[StringFact, _Mapping]] = ..., container_runtime: _Optional[_Union[StringFact, _Mapping]] = ..., container_runtime_version: _Optional[_Union[StringFact, _Mapping]] = ..., kubelet_version: _Optional[_Union[StringFact, _Mapping]] = ..., cloud_provider: _Optional[_Union[StringFact, _Mapping]] = ..., instance_type: _Optional[_Union[StringFact, _Mapping]] = ..., region: _Optional[_Union[StringFact, _Mapping]] = ..., zone: _Optional[_Union[StringFact, _Mapping]] = ..., kernel_cmdline: _Optional[_Union[StringFact, _Mapping]] = ..., kernel_modules: _Optional[_Union[StringFact, _Mapping]] = ..., sysctls: _Optional[_Iterable[_Union[Sysctl, _Mapping]]] = ..., systemd_units: _Optional[_Iterable[_Union[SystemdUnit, _Mapping]]] = ...) -> None: ...

class Sysctl(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: StringFact
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[StringFact, _Mapping]] = ...) -> None: ...

class SystemdUnit(_message.Message):
    __slots__ = ("name", "fragment_path", "unit_file_state", "running", "package_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_PATH_FIELD_NUMBER: _ClassVar[int]
    UNIT_FILE_STATE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    PACKAGE_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    fragment_path: StringFact
    unit_file_state: StringFact
    running: BoolFact
    package_version: StringFact
    def __init__(self, name: _Optional[str] = ..., fragment_path: _Optional[_Union[StringFact, _Mapping]] = ..., unit_file_state: _Optional[_Union[StringFact, _Mapping]] = ..., running: _Optional[_Union[BoolFact, _Mapping]] = ..., package_version: _Optional[_Union[StringFact, _Mapping]] = ...) -> None: ...

class DriverFacts(_message.Message):
    __slots__ = ("driver_version", "nvml_version", "cuda_driver_version", "kernel_module_flavour", "fabric_manager_version", "kernel_module_version", "modules")
    DRIVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    NVML_VERSION_FIELD_NUMBER: _ClassVar[int]
    CUDA_DRIVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    KERNEL_MODULE_FLAVOUR_FIELD_NUMBER: _ClassVar[int]
    FABRIC_MANAGER_VERSION_FIELD_NUMBER: _ClassVar[int]
    KERNEL_MODULE_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODULES_FIELD_NUMBER: _ClassVar[int]
    driver_version: StringFact
    nvml_version: StringFact
    cuda_driver_version: StringFact
    kernel_module_flavour: StringFact
    fabric_manager_version: StringFact
    kernel_module_version: StringFact
    modules: _containers.RepeatedCompositeFieldContainer[NvidiaModule]
    def __init__(self, driver_version: _Optional[_Union[StringFact, _Mapping]] = ..., nvml_version: _Optional[_Union[StringFact, _Mapping]] = ..., cuda_driver_version: _Optional[_Union[StringFact, _Mapping]] = ..., kernel_module_flavour: _Optional[_Union[StringFact, _Mapping]] = ..., fabric_manager_version: _Optional[_Union[StringFact, _Mapping]] = ..., kernel_module_version: _Optional[_Union[StringFact, _Mapping]] = ..., modules: _Optional[_Iterable[_Union[NvidiaModule, _Mapping]]] = ...) -> None: ...

class NvidiaModule(_message.Message):
    __slots__ = ("name", "version", "parameters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: StringFact
    parameters: StringFact
    def __init__(self, name: _Optional[str] = ..., version: _Optional[_Union[StringFact, _Mapping]] = ..., parameters: _Optional[_Union[StringFact, _Mapping]] = ...) -> None: ...

class CudaRuntime(_message.Message):
    __slots__ = ("path", "version")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    version: StringFact
    def __init__(self, path: _Optional[str] = ..., version: _Optional[_Union[StringFact, _Mapping]] = ...) -> None: ...

class CudaFacts(_message.Message):
    __slots__ = ("cuda_toolkit_version", "runtimes")
    CUDA_TOOLKIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    cuda_toolkit_version: StringFact
    runtimes: _containers.RepeatedCompositeFieldContainer[CudaRuntime]
    def __init__(self, cuda_toolkit_version: _Optional[_Union[StringFact, _Mapping]] = ..., runtimes: _Optional[_Iterable[_Union[CudaRuntime, _Mapping]]] = ...) -> None: ...

class NcclLibrary(_message.Message):
    __slots__ = ("path", "version")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    version: StringFact
    def __init__(self, path: _Optional[str] = ..., version: _Optional[_Union[StringFact, _Mapping]] = ...) -> None: ...

class NcclFacts(_message.Message):
    __slots__ = ("libraries",)
    LIBRARIES_FIELD_NUMBER: _ClassVar[int]
    libraries: _containers.RepeatedCompositeFieldContainer[NcclLibrary]
    def __init__(self, libraries: _Optional[_Iterable[_Union[NcclLibrary, _Mapping]]] = ...) -> None: ...

class GpuFacts(_message.Message):
    __slots__ = ("index", "uuid", "name", "pci_bus_id", "pci_device_id", "architecture", "compute_capability", "memory_total_bytes", "vbios_version", "inforom_version", "serial", "persistence_mode", "mig_mode_current", "mig_mode_pending", "ecc_mode_current", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failed", "pcie_link_gen_current", "pcie_link_gen_max", "pcie_link_width_current", "pcie_link_width_max", "nvlink_links_up", "nvlink_links_total", "power_limit_watts", "clock_sm_max_mhz", "clock_memory_max_mhz", "gsp_firmware_version", "addressing_mode", "c2c_mode_enabled", "fabric_state", "fabric_clique_id", "fabric_cluster_uuid", "fabric_health", "xid_count", "xids")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    PCI_DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    VBIOS_VERSION_FIELD_NUMBER: _ClassVar[int]
    INFOROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    PERSISTENCE_MODE_FIELD_NUMBER: _ClassVar[int]
    MIG_MODE_CURRENT_FIELD_NUMBER: _ClassVar[int]
    MIG_MODE_PENDING_FIELD_NUMBER: _ClassVar[int]
    ECC_MODE_CURRENT_FIELD_NUMBER: _ClassVar[int]
    ECC_UNCORRECTED_VOLATILE_FIELD_NUMBER: _ClassVar[int]
    ECC_UNCORRECTED_AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    RETIRED_PAGES_PENDING_FIELD_NUMBER: _ClassVar[int]
    REMAPPED_ROWS_PENDING_FIELD_NUMBER: _ClassVar[int]
    REMAPPED_ROWS_FAILED_FIELD_NUMBER: _ClassVar[int]
    PCIE_LINK_GEN_CURRENT_FIELD_NUMBER: _ClassVar[int]
    PCIE_LINK_GEN_MAX_FIELD_NUMBER: _ClassVar[int]
    PCIE_LINK_WIDTH_CURRENT_FIELD_NUMBER: _ClassVar[int]
    PCIE_LINK_WIDTH_MAX_FIELD_NUMBER: _ClassVar[int]
    NVLINK_LINKS_UP_FIELD_NUMBER: _ClassVar[int]
    NVLINK_LINKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    POWER_LIMIT_WATTS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_SM_MAX_MHZ_FIELD_NUMBER: _ClassVar[int]
    CLOCK_MEMORY_MAX_MHZ_FIELD_NUMBER: _ClassVar[int]
    GSP_FIRMWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADDRESSING_MODE_FIELD_NUMBER: _ClassVar[int]
    C2C_MODE_ENABLED_FIELD_NUMBER: _ClassVar[int]
    FABRIC_STATE_FIELD_NUMBER: _ClassVar[int]
    FABRIC_CLIQUE_ID_FIELD_NUMBER: _ClassVar[int]
    FABRIC_CLUSTER_UUID_FIELD_NUMBER: _ClassVar[int]
    FABRIC_HEALTH_FIELD_NUMBER: _ClassVar[int]
    XID_COUNT_FIELD_NUMBER: _ClassVar[int]
    XIDS_FIELD_NUMBER: _ClassVar[int]
    index: Int64Fact
    uuid: StringFact
    name: StringFact
    pci_bus_id: StringFact
    pci_device_id: StringFact
    architecture: StringFact
    compute_capability: StringFact
    memory_total_bytes: Int64Fact
    vbios_version: StringFact
    inforom_version: StringFact
    serial: StringFact
    persistence_mode: BoolFact
    mig_mode_current: BoolFact
    mig_mode_pending: BoolFact
    ecc_mode_current: BoolFact
    ecc_uncorrected_volatile: Int64Fact
    ecc_uncorrected_aggregate: Int64Fact
    retired_pages_pending: Int64Fact
    remapped_rows_pending: Int64Fact
    remapped_rows_failed: Int64Fact
    pcie_link_gen_current: Int64Fact
    pcie_link_gen_max: Int64Fact
    pcie_link_width_current: Int64Fact
    pcie_link_width_max: Int64Fact
    nvlink_links_up: Int64Fact
    nvlink_links_total: Int64Fact
    power_limit_watts: DoubleFact
    clock_sm_max_mhz: Int64Fact
    clock_memory_max_mhz: Int64Fact
    gsp_firmware_version: StringFact
    addressing_mode: StringFact
    c2c_mode_enabled: BoolFact
    fabric_state: StringFact
    fabric_clique_id: Int64Fact
    fabric_cluster_uuid: StringFact
    fabric_health: StringFact
    xid_count: Int64Fact
    xids: _containers.RepeatedCompositeFieldContainer[XidCode]
    def __init__(self, index: _Optional[_Union[Int64Fact, _Mapping]] = ..., uuid: _Optional[_Union[StringFact, _Mapping]] = ..., name: _Optional[_Union[StringFact, _Mapping]] = ..., pci_bus_id: _Optional[_Union[StringFact, _Mapping]] = ..., pci_device_id: _Optional[_Union[StringFact, _Mapping]] = ..., architecture: _Optional[_Union[StringFact, _Mapping]] = ..., compute_capability: _Optional[_Union[StringFact, _Mapping]] = ..., memory_total_bytes: _Optional[_Union[Int64Fact, _Mapping]] = ..., vbios_version: _Optional[_Union[StringFact, _Mapping]] = ..., inforom_version: _Optional[_Union[StringFact, _Mapping]] = ..., serial: _Optional[_Union[StringFact, _Mapping]] = ..., persistence_mode: _Optional[_Union[BoolFact, _Mapping]] = ..., mig_mode_current: _Optional[_Union[BoolFact, _Mapping]] = ..., mig_mode_pending: _Optional[_Union[BoolFact, _Mapping]] = ..., ecc_mode_current: _Optional[_Union[BoolFact, _Mapping]] = ..., ecc_uncorrected_volatile: _Optional[_Union[Int64Fact, _Mapping]] = ..., ecc_uncorrected_aggregate: _Optional[_Union[Int64Fact, _Mapping]] = ..., retired_pages_pending: _Optional[_Union[Int64Fact, _Mapping]] = ..., remapped_rows_pending: _Optional[_Union[Int64Fact, _Mapping]] = ..., remapped_rows_failed: _Optional[_Union[Int64Fact, _Mapping]] = ..., pcie_link_gen_current: _Optional[_Union[Int64Fact, _Mapping]] = ..., pcie_link_gen_max: _Optional[_Union[Int64Fact, _Mapping]] = ..., pcie_link_width_current: _Optional[_Union[Int64Fact, _Mapping]] = ..., pcie_link_width_max: _Optional[_Union[Int64Fact, _Mapping]] = ..., nvlink_links_up: _Optional[_Union[Int64Fact, _Mapping]] = ..., nvlink_links_total: _Optional[_Union[Int64Fact, _Mapping]] = ..., power_limit_watts: _Optional[_Union[DoubleFact, _Mapping]] = ..., clock_sm_max_mhz: _Optional[_Union[Int64Fact, _Mapping]] = ..., clock_memory_max_mhz: _Optional[_Union[Int64Fact, _Mapping]] = ..., gsp_firmware_version: _Optional[_Union[StringFact, _Mapping]] = ..., addressing_mode: _Optional[_Union[StringFact, _Mapping]] = ..., c2c_mode_enabled: _Optional[_Union[BoolFact, _Mapping]] = ..., fabric_state: _Optional[_Union[StringFact, _Mapping]] = ..., fabric_clique_id: _Optional[_Union[Int64Fact, _Mapping]] = ..., fabric_cluster_uuid: _Optional[_Union[StringFact, _Mapping]] = ..., fabric_health: _Optional[_Union[StringFact, _Mapping]] = ..., xid_count: _Optional[_Union[Int64Fact, _Mapping]] = ..., xids: _Optional[_Iterable[_Union[XidCode, _Mapping]]] = ...) -> None: ...

class XidCode(_message.Message):
    __slots__ = ("code", "count", "last_seen_unix_s")
    CODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    code: int
    count: Int64Fact
    last_seen_unix_s: Int64Fact
    def __init__(self, code: _Optional[int] = ..., count: _Optional[_Union[Int64Fact, _Mapping]] = ..., last_seen_unix_s: _Optional[_Union[Int64Fact, _Mapping]] = ...) -> None: ...

class NodeFacts(_message.Message):
    __slots__ = ("host", "driver", "cuda", "nccl", "gpus")
    HOST_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    CUDA_FIELD_NUMBER: _ClassVar[int]
    NCCL_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    host: HostFacts
    driver: DriverFacts
    cuda: CudaFacts
    nccl: NcclFacts
    gpus: _containers.RepeatedCompositeFieldContainer[GpuFacts]
    def __init__(self, host: _Optional[_Union[HostFacts, _Mapping]] = ..., driver: _Optional[_Union[DriverFacts, _Mapping]] = ..., cuda: _Optional[_Union[CudaFacts, _Mapping]] = ..., nccl: _Optional[_Union[NcclFacts, _Mapping]] = ..., gpus: _Optional[_Iterable[_Union[GpuFacts, _Mapping]]] = ...) -> None: ...

class GpuSensors(_message.Message):
    __slots__ = ("index", "temperature_celsius", "power_draw_milliwatts", "sm_clock_mhz", "memory_clock_mhz", "gpu_utilization_percent", "memory_utilization_percent", "memory_used_bytes", "clock_event_reasons", "ecc_corrected_volatile", "ecc_corrected_aggregate", "pcie_replay_count", "nvlink_replay_errors", "nvlink_recovery_errors", "nvlink_crc_flit_errors", "moved")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_CELSIUS_FIELD_NUMBER: _ClassVar[int]
    POWER_DRAW_MILLIWATTS_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEMORY_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    GPU_UTILIZATION_PERCENT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_UTILIZATION_PERCENT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    CLOCK_EVENT_REASONS_FIELD_NUMBER: _ClassVar[int]
    ECC_CORRECTED_VOLATILE_FIELD_NUMBER: _ClassVar[int]
    ECC_CORRECTED_AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    PCIE_REPLAY_COUNT_FIELD_NUMBER: _ClassVar[int]
    NVLINK_REPLAY_ERRORS_FIELD_NUMBER: _ClassVar[int]
    NVLINK_RECOVERY_ERRORS_FIELD_NUMBER: _ClassVar[int]
    NVLINK_CRC_FLIT_ERRORS_FIELD_NUMBER: _ClassVar[int]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    index: int
    temperature_celsius: int
    power_draw_milliwatts: int
    sm_clock_mhz: int
    memory_clock_mhz: int
    gpu_utilization_percent: int
    memory_utilization_percent: int
    memory_used_bytes: int
    clock_event_reasons: int
    ecc_corrected_volatile: int
    ecc_corrected_aggregate: int
    pcie_replay_count: int
    nvlink_replay_errors: int
    nvlink_recovery_errors: int
    nvlink_crc_flit_errors: int
    moved: int
    def __init__(self, index: _Optional[int] = ..., temperature_celsius: _Optional[int] = ..., power_draw_milliwatts: _Optional[int] = ..., sm_clock_mhz: _Optional[int] = ..., memory_clock_mhz: _Optional[int] = ..., gpu_utilization_percent: _Optional[int] = ..., memory_utilization_percent: _Optional[int] = ..., memory_used_bytes: _Optional[int] = ..., clock_event_reasons: _Optional[int] = ..., ecc_corrected_volatile: _Optional[int] = ..., ecc_corrected_aggregate: _Optional[int] = ..., pcie_replay_count: _Optional[int] = ..., nvlink_replay_errors: _Optional[int] = ..., nvlink_recovery_errors: _Optional[int] = ..., nvlink_crc_flit_errors: _Optional[int] = ..., moved: _Optional[int] = ...) -> None: ...

class SensorReport(_message.Message):
    __slots__ = ("gpus", "seq", "content_sha256", "changes_only")
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    CHANGES_ONLY_FIELD_NUMBER: _ClassVar[int]
    gpus: _containers.RepeatedCompositeFieldContainer[GpuSensors]
    seq: int
    content_sha256: bytes
    changes_only: bool
    def __init__(self, gpus: _Optional[_Iterable[_Union[GpuSensors, _Mapping]]] = ..., seq: _Optional[int] = ..., content_sha256: _Optional[bytes] = ..., changes_only: _Optional[bool] = ...) -> None: ...
