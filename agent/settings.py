"""The agent's one settings object: defaults here, overridden by PLUMB_* env vars, then flags."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from plumb.logs import LogFormat


class StreamSettings(BaseModel):
    """How the agent talks to the aggregator."""

    # Poll NVML and the host this often; 10 s keeps NVML's cost negligible on a busy node,
    # 0.2 s is the floor the simulator and the latency benchmark use.
    poll_interval_s: float = Field(10.0, ge=0.2)
    # GPU sensor readings (temperature, power, clocks, utilisation) go out this often, as one
    # SensorReport holding only the latest values (a session's second report half an interval
    # to one and a half after its first: stream.spread): 30 s is the interval the chart
    # scrapes /metrics/sensors at and dcgm-exporter's default collection interval, so a
    # scrape sees a fresh reading and nothing between scrapes is sent. Every report costs the
    # aggregator a message: at 10,000 nodes, 15 s would be 667 a second.
    sensor_interval_s: float = Field(30.0, ge=0.2)
    # A heartbeat when nothing changed; a third of the aggregator's idle timeout (90 s),
    # so one lost beat does not mark the node disconnected. The aggregator's Welcome may override.
    heartbeat_interval_s: float = Field(30.0, gt=0)
    # Once a lost aggregator accepts connections again, the agent waits a random delay in
    # [0, this] before Hello: 10,000 agents arrive over 10 s (~1,000 a second), which one
    # aggregator core resyncs as they come, instead of all at once (Welcome timeouts) or
    # over tens of seconds. Doubled per failed attempt in a row, up to backoff_max_s.
    reconnect_window_s: float = Field(10.0, gt=0)
    # Caps the doubled window: an aggregator that keeps failing Hello (auth, overload) sees
    # each agent at most about twice a minute.
    backoff_max_s: float = Field(30.0, gt=0)
    # While the aggregator is unreachable, connection attempts (gRPC's own, TCP and HTTP/2
    # only, never reaching its Python) at most this far apart: it is seen back within 2 s.
    probe_max_s: float = Field(2.0, gt=0)
    # After this long unreachable, a stream is tried anyway so the reason (connection refused,
    # a TLS error) reaches the log; such attempts do not widen the reconnect window.
    unreachable_retry_s: float = Field(60.0, gt=0)
    # A Welcome must arrive this soon after Hello, or the connection is retried. An aggregator
    # restarting under 10,000 agents answers the last Hellos 7-15 s after they were sent:
    # with 10 s, on a slow restart 8,873 agents gave up and sent Hello again, and the fleet
    # took 57.4 s to come back; with 30 s, 33.8 s (bench/README.md, round 51).
    # Waiting is what helps a busy aggregator; a killed one ends the connection at once, and
    # only a host gone without a word is waited out.
    welcome_timeout_s: float = Field(30.0, gt=0)


class AgentSettings(BaseSettings):
    """Everything `plumb-agent` can be told; flags mirror the PLUMB_* env vars."""

    model_config = SettingsConfigDict(env_prefix="PLUMB_", env_nested_delimiter="__")

    aggregator: str = "plumb-aggregator:7443"
    # Defaults to the host name; the DaemonSet sets it from the downward API (spec.nodeName).
    node_name: str | None = None
    # A shipped profile name, a profile path, or a real capture (nvidia-smi -q -x XML, a
    # mock-NVML config): simulate a GPU node instead of reading this host.
    simulate: str | None = None
    # Where the host's files are: "/" on a bare host, the read-only mount in a container.
    host_root: Path = Path("/")
    # Extra directories (under host_root) to search for libcudart and libnccl.
    library_dirs: list[Path] = []
    # Simulation writes its fake host tree here; a temp dir when unset.
    sim_workdir: Path | None = None
    log_level: str = "INFO"
    # Text for a terminal; the chart sets json, one object a line for the log pipeline.
    log_format: LogFormat = "text"
    # The credential sent to the aggregator: the projected ServiceAccount token's file (the
    # chart mounts one with audience plumb; re-read on every connection, as it rotates), or
    # a shared token for clusters without Kubernetes identity.
    token_file: Path | None = None
    token: SecretStr | None = None
    # The CA certificate (PEM) that signed the aggregator's: set it to stream over TLS.
    # The aggregator's certificate must name the host in `aggregator`, or `tls_server_name`.
    ca_file: Path | None = None
    # The name the aggregator's certificate must carry when it is not the host dialled: the
    # chart's agents dial a Service of their own, whose pods are reachable before ready,
    # and expect the aggregator's main Service name.
    tls_server_name: str | None = Field(None, min_length=1)
    stream: StreamSettings = StreamSettings()

    @model_validator(mode="after")
    def _server_name_needs_tls(self) -> AgentSettings:
        if self.tls_server_name is not None and self.ca_file is None:
            raise ValueError("tls_server_name names the certificate to expect: it needs ca_file")
        return self

    def read_token(self) -> str | None:
        """The token to present now; an unreadable token file is an error, never skipped."""
        if self.token_file is not None:
            return self.token_file.read_text().strip() or None
        return self.token.get_secret_value() if self.token else None
