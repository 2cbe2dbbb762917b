from plumb.v1 import facts_pb2 as _facts_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Hello(_message.Message):
    __slots__ = ("node_name", "agent_version", "boot_id", "capabilities", "content_sha256")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    agent_version: str
    boot_id: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    content_sha256: bytes
    def __init__(self, node_name: _Optional[str] = ..., agent_version: _Optional[str] = ..., boot_id: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., content_sha256: _Optional[bytes] = ...) -> None: ...

class FullFacts(_message.Message):
    __slots__ = ("seq", "facts", "content_sha256")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    seq: int
    facts: _facts_pb2.NodeFacts
    content_sha256: bytes
    def __init__(self, seq: _Optional[int] = ..., facts: _Optional[_Union[_facts_pb2.NodeFacts, _Mapping]] = ..., content_sha256: _Optional[bytes] = ...) -> None: ...

class FactsDelta(_message.Message):
    __slots__ = ("seq", "changed", "removed", "content_sha256")
    class ChangedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _facts_pb2.Fact
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_facts_pb2.Fact, _Mapping]] = ...) -> None: ...
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    seq: int
    changed: _containers.MessageMap[str, _facts_pb2.Fact]
    removed: _containers.RepeatedScalarFieldContainer[str]
    content_sha256: bytes
    def __init__(self, seq: _Optional[int] = ..., changed: _Optional[_Mapping[str, _facts_pb2.Fact]] = ..., removed: _Optional[_Iterable[str]] = ..., content_sha256: _Optional[bytes] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("seq", "content_sha256")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    seq: int
    content_sha256: bytes
    def __init__(self, seq: _Optional[int] = ..., content_sha256: _Optional[bytes] = ...) -> None: ...

class CheckResult(_message.Message):
    __slots__ = ("request_id", "check_id", "status", "message", "value", "unit", "duration_s", "details")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    check_id: str
    status: str
    message: str
    value: float
    unit: str
    duration_s: float
    details: _containers.ScalarMap[str, str]
    def __init__(self, request_id: _Optional[str] = ..., check_id: _Optional[str] = ..., status: _Optional[str] = ..., message: _Optional[str] = ..., value: _Optional[float] = ..., unit: _Optional[str] = ..., duration_s: _Optional[float] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("hello", "full_facts", "delta", "heartbeat", "check_result", "sensors")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    FULL_FACTS_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    CHECK_RESULT_FIELD_NUMBER: _ClassVar[int]
    SENSORS_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    full_facts: FullFacts
    delta: FactsDelta
    heartbeat: Heartbeat
    check_result: CheckResult
    sensors: _facts_pb2.SensorReport
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., full_facts: _Optional[_Union[FullFacts, _Mapping]] = ..., delta: _Optional[_Union[FactsDelta, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., check_result: _Optional[_Union[CheckResult, _Mapping]] = ..., sensors: _Optional[_Union[_facts_pb2.SensorReport, _Mapping]] = ...) -> None: ...

class ReportSettings(_message.Message):
    __slots__ = ("poll_interval_s", "heartbeat_interval_s", "sensors_heartbeat", "sensor_changes")
    POLL_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    SENSORS_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SENSOR_CHANGES_FIELD_NUMBER: _ClassVar[int]
    poll_interval_s: float
    heartbeat_interval_s: float
    sensors_heartbeat: bool
    sensor_changes: bool
    def __init__(self, poll_interval_s: _Optional[float] = ..., heartbeat_interval_s: _Optional[float] = ..., sensors_heartbeat: _Optional[bool] = ..., sensor_changes: _Optional[bool] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("session_id", "report_settings", "resumed")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    report_settings: ReportSettings
    resumed: bool
    def __init__(self, session_id: _Optional[str] = ..., report_settings: _Optional[_Union[ReportSettings, _Mapping]] = ..., resumed: _Optional[bool] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("seq", "durable_seq")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DURABLE_SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    durable_seq: int
    def __init__(self, seq: _Optional[int] = ..., durable_seq: _Optional[int] = ...) -> None: ...

class Resync(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class CheckSpec(_message.Message):
    __slots__ = ("id", "timeout_s", "parameters")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    id: str
    timeout_s: float
    parameters: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., timeout_s: _Optional[float] = ..., parameters: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RunChecks(_message.Message):
    __slots__ = ("request_id", "check_ids", "checks")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_IDS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    check_ids: _containers.RepeatedScalarFieldContainer[str]
    checks: _containers.RepeatedCompositeFieldContainer[CheckSpec]
    def __init__(self, request_id: _Optional[str] = ..., check_ids: _Optional[_Iterable[str]] = ..., checks: _Optional[_Iterable[_Union[CheckSpec, _Mapping]]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("welcome", "ack", "resync", "run_checks")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    RUN_CHECKS_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    ack: Ack
    resync: Resync
    run_checks: RunChecks
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., resync: _Optional[_Union[Resync, _Mapping]] = ..., run_checks: _Optional[_Union[RunChecks, _Mapping]] = ...) -> None: ...
