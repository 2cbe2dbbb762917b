"""The aggregator's one settings object: defaults here, PLUMB_* env vars, then flags."""

from __future__ import annotations

import os
import socket
from datetime import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from plumb.logs import LogFormat


class IngestSettings(BaseModel):
    """Bounds and timers of the agents' streams."""

    # A full 8-GPU NodeFacts is ~10 KiB; 1 MiB leaves room for 256 GPUs and long error
    # strings while refusing a runaway message before it is parsed.
    max_message_bytes: int = Field(1 << 20, ge=4096)
    # The first message must be Hello, and soon: a silent connection holds a slot.
    hello_timeout_s: float = Field(10.0, gt=0)
    # Three heartbeats: one lost beat is no disconnect.
    idle_timeout_s: float = Field(90.0, gt=0)
    # Sent in Welcome; the agent heartbeats this often when nothing changed.
    heartbeat_interval_s: float = Field(30.0, gt=0)
    # Aggregator-initiated messages (RunChecks) waiting per stream; a run sends one per node,
    # so a handful absorbs overlapping runs while a stuck stream refuses more.
    outbound_queue_max: int = Field(16, ge=1)
    # GPU servers hold 8 or 16 GPUs (a GB200 tray 4): 64 leaves room for denser boards while
    # refusing a node claiming hundreds, each of which costs ~30 facts and metric series.
    # The wire contract's ceiling (plumb.facts.MAX_REPEATED) is 256.
    max_gpus_per_node: int = Field(64, ge=1, le=256)
    # A delta changes at most every leaf of a node: ~30 per GPU plus ~60 host, driver and
    # library facts, so ~2,000 for 64 GPUs; twice that is a broken or hostile agent.
    max_delta_fields: int = Field(4096, ge=64)
    # Capabilities an agent lists in Hello: two today; 32 leaves room for many more.
    max_capabilities: int = Field(32, ge=1)
    # Node names this aggregator has never held, admitted per minute (a token bucket that
    # also holds a minute's worth at once): one process's design scale, 10,000 agents, may
    # all connect for the first time together; past that a client inventing names is refused
    # (RESOURCE_EXHAUSTED, counted) instead of growing memory and the database unbounded.
    max_new_nodes_per_minute: int = Field(10_000, ge=1)
    # Streams between Hello and their first FullFacts applied (the costly part of a connect:
    # parsing, hashing, evaluating ~300 facts) at once (ingest/syncing.py). Past the cap a
    # Hello is answered at once with RESOURCE_EXHAUSTED and a retry hint the agent waits out,
    # instead of every Hello queueing on a saturated loop until agents time out waiting for
    # Welcome. The cap is as many streams as finished in sync_target_s at the rate they
    # lately finished, within these bounds. 256, also the cap until a rate is known: the rate
    # is measured from admitted syncs, so it can only double the cap each second; from 32, a
    # restarted aggregator refused 168 of 200 reconnecting agents with hints up to 11 s
    # (tests/integration/faults/test_aggregator_killed.py), and at 2,000 agents 256 resynced
    # a SIGKILL storm in 65.6 s where 32 took 86.6 s (bench/results/ramp_storm_2000_*.json).
    # Refused agents are lined up no slower than this many per sync_target_s.
    min_syncing_streams: int = Field(256, ge=1)
    # A fixed 256 throttled a 10,000-agent cold start whose agents were slow to send their
    # facts (Little's law: 256 in flight at 1 s each is 256 syncs a second at most); 4,096
    # lets the measured rate decide while bounding the streams held half-open.
    max_syncing_streams: int = Field(4096, ge=1)
    # Streams past that cap wait their turn, welcomed, their FullFacts unread (~15 KB each
    # for an 8-GPU node): enough for a whole cold-started fleet to wait rather than be
    # refused. Past it a Hello is refused RESOURCE_EXHAUSTED with a hint; 0 refuses at once.
    max_waiting_streams: int = Field(16384, ge=0)
    # Streams gRPC holds before the servicer takes them, one a turn of the event loop: a
    # reconnect storm arrives faster. gRPC's own limit (past 1,000 some are ended at random,
    # past 3,000 all) ends them unanswered, which agents read as CANCELLED or INTERNAL,
    # with no retry hint (bench/README.md, round 50). Held here, each is answered, or
    # refused by the limits above.
    max_pending_streams: int = Field(16384, ge=1)
    # How long a stream admitted now should take to sync: a fifth of the 10 s Welcome
    # timeout of older agents (30 s now), so an admitted agent is answered long before it
    # gives up.
    sync_target_s: float = Field(2.0, gt=0)
    # The share of the event loop syncs may hold while new streams arrive
    # (aggregator/pacing.py): after each sync the loop is free for (1 - duty) / duty of the
    # time it took, so gRPC takes new streams between syncs. In 10,000-agent cold starts,
    # 1.0 (back to back) cost 12,009 and 25,181 failed attempts and welcomed the last agent
    # after 160 and 265 s; 0.25 cost 7,271 and 3,380 and took 74 and 68 s (bench/README.md,
    # round 36).
    sync_duty: float = Field(0.25, gt=0, le=1)
    # A stream that arrives while the aggregator is still loading its stored nodes (the port
    # opens first, ingest/port.py) waits this long, half the 10 s Welcome timeout of older
    # agents (30 s now), then is refused UNAVAILABLE with a short retry hint.
    start_hold_s: float = Field(5.0, gt=0)

    @model_validator(mode="after")
    def _syncing_bounds(self) -> IngestSettings:
        if self.min_syncing_streams > self.max_syncing_streams:
            raise ValueError(
                "ingest: min_syncing_streams must not exceed max_syncing_streams "
                f"({self.min_syncing_streams} > {self.max_syncing_streams})"
            )
        return self


class ScheduledPhase(BaseModel):
    """One phase validated on a schedule (aggregator/validation/schedule.py)."""

    model_config = ConfigDict(extra="forbid")

    phase: str
    # An hour at least: a performance phase keeps GPUs busy for minutes per node.
    every_s: float = Field(ge=60)
    # The UTC time of day of the first run (then every `every_s`): "02:00" with 86400 is
    # nightly. None: the first run is `every_s` after start.
    at: time | None = None
    # Start only on nodes whose every GPU is idle (utilisation at most `busy_above`); a node
    # whose utilisation is unknown is not idle.
    idle_only: bool = False
    busy_above: float = Field(0.05, ge=0, le=1)


class ValidationSettings(BaseModel):
    """Validation runs."""

    # Phases run on their own, opt-in: e.g. PLUMB_VALIDATION__SCHEDULE='[{"phase":
    # "conformance", "every_s": 3600}, {"phase": "performance", "every_s": 86400,
    # "at": "02:00", "idle_only": true}]'. Only the leader starts them; never two at once.
    schedule: list[ScheduledPhase] = []

    # Nodes with checks in flight at once; a RunChecks costs the aggregator one small message
    # and a waiting coroutine, so this is high enough for a 1,000-node fan-out in one wave.
    max_parallel_nodes: int = Field(1000, ge=1)
    # Added to the sum of a node's check timeouts before its missing checks become `error`:
    # covers the network and the agent's queue.
    grace_s: float = Field(10.0, ge=0)
    # A run's global deadline when the request gives none: a full performance phase is about
    # 15 min of timeouts per node, nodes run in parallel. A plan whose GPU-exclusive checks
    # take longer in turn (the two-node NCCL checks, 20 min each) gets that bound instead.
    default_deadline_s: float = Field(1800.0, gt=0)
    # Runs kept in memory for GET (older ones are read from the store).
    keep_runs: int = Field(50, ge=1)
    # Where Kubernetes checks create their Jobs (the chart's Role allows them only there).
    # The chart sets PLUMB_VALIDATION_NAMESPACE; PLUMB_VALIDATION__NAMESPACE works too.
    namespace: str = "plumb-validation"
    # Kubernetes checks run when the aggregator has a client: `auto` uses auth.kubeconfig, or
    # the pod's ServiceAccount when in a cluster; `off` skips them.
    kubernetes: Literal["auto", "off"] = "auto"
    # The Prometheus that scrapes dcgm-exporter (e.g. http://prometheus-operated.monitoring:9090),
    # asked by Prometheus checks (recipes/checks/metrics.yaml); None skips them.
    prometheus_url: str | None = None


class NodeSettings(BaseModel):
    """How long a node no agent reports for is kept."""

    # A week: longer than a node is usually down for repair or a long drain, short enough
    # that a decommissioned or renamed node stops showing as down. None keeps nodes until
    # `plumb node rm`.
    expire_after_s: float | None = Field(7 * 86400.0, gt=0)
    # A removed (or expired) node's fact history and findings stay in the database, for
    # "what did that node run?" after it is gone; false drops them with it. Retention of
    # history as a whole is another setting's job.
    keep_history: bool = True
    # How often to look for expired nodes; the expiry itself is coarse.
    expire_check_s: float = Field(60.0, gt=0)


class StoreSettings(BaseModel):
    """The write path to the database."""

    # Bounded: when full, updates are refused (plumb_store_dropped_updates_total) rather than
    # memory growing. A cold start of 10,000 agents queues about two updates per node (first
    # facts, ~270 rows each, then drift transitions) faster than SQLite drains them: 10,000
    # dropped 1,240 updates in bench/fleet.py; 50,000 holds the whole wave (~40 KiB per
    # queued first-facts update, so a few hundred MiB at the peak).
    queue_max: int = Field(50_000, ge=1)
    # One transaction per batch; 500 rows keep SQLite transactions under ~50 ms.
    batch_max: int = Field(500, ge=1)
    # Wait this long for more updates to join a batch; well under the 1 s freshness goal.
    linger_s: float = Field(0.05, ge=0)
    # History rows, closed findings, finished validation runs and removed nodes older than
    # this are deleted (store/retention.py): half a year answers "what did this node run last
    # quarter?" and bounds the database. None keeps everything.
    retention_days: float | None = Field(180.0, gt=0)
    # How often the leader looks for what has aged out; an hour keeps each pass small.
    retention_check_s: float = Field(3600.0, gt=0)


class ReplicaSettings(BaseModel):
    """Several aggregators on one PostgreSQL (aggregator/intake/replicas.py); unused on SQLite."""

    # This process among the replicas: the chart sets the pod name. Host and pid by default,
    # unique among processes on one machine.
    name: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        min_length=1,
        max_length=128,
    )
    # How often a replica reads the nodes the others changed: most of how stale its view of
    # them can be (docs/replicas.md measures it), at one small query per second.
    poll_interval_s: float = Field(1.0, gt=0)
    # Rows stamped this long before the newest one seen are read again: covers clock skew
    # between replicas and a transaction committing after a later-stamped one.
    overlap_s: float = Field(5.0, ge=0)
    # A replica not seen for this long is gone and its nodes' series move to another: ten
    # missed polls, longer than a pause for garbage collection or a slow database.
    alive_s: float = Field(10.0, gt=0)


class RecipeSettings(BaseModel):
    """Where recipes come from and what the facts cannot say."""

    # The recipes/ tree; None means the one shipped beside the aggregator.
    dir: Path | None = None
    # A folder merged over it (AICR's --data): same-named files replace, registry.yaml merges.
    data: Path | None = None
    # Workload intent and platform are not visible in facts: the cluster's operators say.
    intent: str = "any"
    platform: str = "any"
    # Who installs the driver, per pool (pool name as `plumb nodes` shows it, or a glob:
    # `eks/l40s/*`), where the facts cannot tell: "host" (the node image owns it; the recipe
    # judges the driver by its range) or "operator" (drift compares it with the recipe's pin).
    # Empty: inferred per node from its facts (recipes/drift.yaml, driver_owner).
    driver_owner: dict[str, Literal["operator", "host"]] = {}


class AuthSettings(BaseModel):
    """How agents prove who they are (see aggregator/ingest/auth.py)."""

    # `none` suits only loopback labs and the demo: the chart sets `kubernetes`.
    mode: Literal["none", "token", "kubernetes"] = "none"
    # `token` mode: the shared bearer token every agent presents.
    token: SecretStr | None = None
    # `kubernetes` mode: None means the pod's own ServiceAccount (in cluster).
    kubeconfig: Path | None = None
    # The audience the agents' projected tokens are minted for.
    audience: str = "plumb"
    # `kubernetes` mode: a token counts only for a pod of the agent's DaemonSet. No default:
    # guessing them would trust whatever workload happens to carry the guessed names; the
    # chart sets all three (the release namespace, the agent's ServiceAccount and DaemonSet).
    agent_namespace: str | None = None
    agent_service_account: str | None = None
    agent_daemonset: str | None = None

    @model_validator(mode="after")
    def _token_given(self) -> AuthSettings:
        if self.mode == "token" and not self.token:
            raise ValueError("auth.mode token needs auth.token (PLUMB_AUTH__TOKEN)")
        agent = (self.agent_namespace, self.agent_service_account, self.agent_daemonset)
        if self.mode == "kubernetes" and not all(agent):
            raise ValueError(
                "auth.mode kubernetes needs the agent's DaemonSet: PLUMB_AUTH__AGENT_NAMESPACE, "
                "PLUMB_AUTH__AGENT_SERVICE_ACCOUNT and PLUMB_AUTH__AGENT_DAEMONSET (the chart "
                "sets them)"
            )
        return self


class ApiSettings(BaseModel):
    """Who may call the HTTP API and how often (docs/security.md, aggregator/api/access.py)."""

    # `NAME SCOPE TOKEN` lines (aggregator/api/tokens.py); the chart mounts it from a Secret.
    tokens_file: Path | None = None
    # Read-scope calls without a token. Only for loopback labs and the demo.
    anonymous_read: bool = False
    # /metrics without a token, for Prometheus; false makes it need the read scope.
    # /healthz and /readyz are always open: kubelet probes carry no token.
    public_metrics: bool = True
    # A token bucket per caller (token name, else client address): sustained requests per
    # second and the burst above it. A person, the CLI or the fleet page (one request per
    # 5 s) stays far below; one script in a tight loop cannot starve the others.
    rate_per_s: float = Field(50.0, gt=0)
    burst: int = Field(100, ge=1)
    # Addresses (or networks) of reverse proxies whose X-Forwarded-For / -Proto are believed,
    # e.g. ["10.0.0.0/8"] behind an ingress. None by default: any other client could name
    # a new address per request and so escape its rate bucket (docs/security.md).
    trusted_proxies: list[str] = []
    # How long a web-page sign-in lasts (aggregator/api/sessions.py): a working day, so an SRE
    # signs in once per shift, while a cookie copied off a machine is useless by the next.
    session_lifetime_s: float = Field(8 * 3600.0, gt=0)
    # A header naming the user an authenticating proxy in front (oauth2-proxy:
    # X-Auth-Request-User, or X-Forwarded-User as its upstream) let through, believed only
    # from trusted_proxies. None (the default): no proxy sign-in (docs/security.md).
    auth_proxy_header: str | None = Field(None, min_length=1, max_length=128)
    # The scope a proxy-signed-in user gets: read, as the page needs; admin makes every user
    # the proxy admits an admin.
    auth_proxy_scope: Literal["read", "admin"] = "read"

    @model_validator(mode="after")
    def _proxy_trusted(self) -> ApiSettings:
        if self.auth_proxy_header and not self.trusted_proxies:
            raise ValueError(
                "api.auth_proxy_header needs api.trusted_proxies (PLUMB_API__TRUSTED_PROXIES): "
                "from any other client the header is a claim anyone can make"
            )
        return self


class TlsSettings(BaseModel):
    """TLS for both listeners (gRPC and HTTP): on when a certificate and key are given."""

    cert_file: Path | None = None
    key_file: Path | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError(
                "TLS needs both tls.cert_file and tls.key_file "
                "(PLUMB_TLS__CERT_FILE, PLUMB_TLS__KEY_FILE), or neither"
            )
        return self

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None


class KubernetesSettings(BaseModel):
    """The aggregator's Kubernetes side (aggregator/k8s/cluster.py): on when in a cluster or
    given `auth.kubeconfig`, the one kubeconfig of the process; off for the embedded demo."""

    mode: Literal["auto", "off"] = "auto"
    # The Lease the replicas campaign for; lives in the aggregator's namespace (`namespace`).
    lease_name: str = "plumb-aggregator"
    # client-go's defaults: a dead leader is replaced within lease_duration_s of its last
    # renewal; a leader that cannot renew for renew_deadline_s stops its cluster-wide work.
    lease_duration_s: float = Field(15.0, gt=0)
    renew_deadline_s: float = Field(10.0, gt=0)
    retry_period_s: float = Field(2.0, gt=0)
    # Opt-in: the leader writes plumb.dev/recipe, plumb.dev/drift, plumb.dev/gpu-health and
    # plumb.dev/validated-stack labels and the GpuStackDrift and PlumbAgentDown node conditions.
    write_nodes: bool = False
    # How often the leader compares what nodes should carry with what it last wrote (and,
    # with remediation.cordon, looks for nodes to cordon); a drift change reaches the Node
    # within this, and an unchanged node costs no API call.
    write_interval_s: float = Field(2.0, gt=0)
    # PlumbAgentDown turns True when the agent's stream is closed, or silent for this long
    # (two of the agent's 30 s heartbeats plus the idle timeout's margin).
    agent_stale_s: float = Field(90.0, gt=0)
    # Component discovery re-lists the GPU stack's workloads this often; an upgrade of the
    # GPU Operator takes minutes, so a minute's delay is invisible.
    discovery_interval_s: float = Field(60.0, gt=0)

    @model_validator(mode="after")
    def _lease_timing(self) -> KubernetesSettings:
        if not self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "kubernetes: need retry_period_s < renew_deadline_s < lease_duration_s, so a "
                "leader steps down before another replica may take over"
            )
        return self


class RemediationSettings(BaseModel):
    """What the leader may do to a sick node on its own (aggregator/k8s/remediation.py).

    Only cordon: Plumb never drains or evicts, so running jobs finish or fail on their own
    and a person decides what happens to them (docs/runbooks.md, "Cordoned by Plumb").
    """

    model_config = ConfigDict(extra="forbid")

    # Opt-in, as NVSentinel's is: cordoning takes capacity away, so the cluster's operators
    # turn it on once they trust the findings that trigger it.
    cordon: bool = False
    # The circuit breaker: never more than this share of a pool's Nodes unschedulable (by
    # anyone: Plumb, an operator, an autoscaler) through a cordon of Plumb's. A tenth: a
    # fleet-wide fault (a bad driver roll, a flapping sensor) takes at most one node in ten
    # out of a pool; the cap rounds down, so a pool of under 10 nodes needs a larger share.
    max_cordoned_fraction: float = Field(0.1, gt=0, le=1)
    # An absolute cap per pool on top of the share; None: the share alone.
    max_cordoned_nodes: int | None = Field(None, ge=1)
    # The open findings that cordon a node: critical health findings (a GPU off the bus, an
    # uncorrectable ECC error, a lost GPU), the faults a scheduler must route around.
    kinds: list[
        Literal["recipe", "constraint", "baseline", "pool", "health", "straggler", "regression"]
    ] = Field(default_factory=lambda: ["health"], min_length=1)
    severities: list[Literal["critical", "warning", "info"]] = Field(
        default_factory=lambda: ["critical"], min_length=1
    )


class GateSettings(BaseModel):
    """Rollout gates (aggregator/gates.py, `GET /v1/gates/{pool}`): a pool's gate opens once
    its canary Nodes run a new stack, passed validation at it and match their twins."""

    model_config = ConfigDict(extra="forbid")

    # The Node label `key=value` that makes a node a canary of its pool; the Node watcher
    # carries it into the node's facts as `cluster.canary`. Under plumb.dev/ like Plumb's
    # own labels, but set by people: Plumb never writes or prunes it (it is not owned).
    canary_label: str = Field("plumb.dev/canary=true", pattern=r"^[^=\s]+=[^=\s]*$")
    # Open findings on a canary that say it does not match its twins and keep the gate
    # closed: health (a GPU, link or XID fault; links are judged against the pool),
    # straggler (benchmark figures under its twins') and regression (under its own previous
    # run). Not baseline or pool: a canary on a new stack differs from both by design.
    blocking_kinds: list[str] = Field(
        default_factory=lambda: ["health", "straggler", "regression"], min_length=1
    )
    blocking_severities: list[Literal["critical", "warning", "info"]] = Field(
        default_factory=lambda: ["critical", "warning"], min_length=1
    )

    @property
    def canary(self) -> tuple[str, str]:
        """The canary label as (key, value)."""
        key, _, value = self.canary_label.partition("=")
        return key, value


class AggregatorSettings(BaseSettings):
    """Everything `plumb serve` can be told."""

    model_config = SettingsConfigDict(env_prefix="PLUMB_", env_nested_delimiter="__")

    # Loopback: with auth.mode none (the default) any peer reaching the port may report for any
    # node, so agents from other hosts need an authenticating mode (the chart sets kubernetes
    # and listens on every address) or, on a trusted lab network, insecure_agents.
    grpc_listen: str = "127.0.0.1:7443"
    # Accept unauthenticated agents (auth.mode none) on a non-loopback grpc_listen; without it
    # `plumb serve` refuses to start there (aggregator/ingest/port.py check_exposure).
    insecure_agents: bool = False
    http_listen: str = "0.0.0.0:8080"
    # HTTP request bodies over this get 413 before they are read; the API's largest body
    # (a validation request) is a few KiB.
    http_max_body_bytes: int = Field(1 << 20, ge=1024)
    # Embedded SQLite by default: one process serves a lab cluster and the demo.
    db: str = "sqlite:///plumb.db"
    log_level: str = "INFO"
    # Text for a terminal; the chart sets json, one object a line for the log pipeline.
    log_format: LogFormat = "text"
    # The long-lived objects are kept out of the garbage collector's passes (aggregator/heap.py);
    # every this often one pass walks them all, for cycles that died among them (~1 s at
    # 10,000 nodes).
    gc_full_pass_s: float = Field(3600.0, gt=0)
    ingest: IngestSettings = IngestSettings()
    store: StoreSettings = StoreSettings()
    nodes: NodeSettings = NodeSettings()
    recipes: RecipeSettings = RecipeSettings()
    auth: AuthSettings = AuthSettings()
    api: ApiSettings = ApiSettings()
    tls: TlsSettings = TlsSettings()
    validation: ValidationSettings = ValidationSettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    remediation: RemediationSettings = RemediationSettings()
    gates: GateSettings = GateSettings()
    # The pod's namespace, as the chart sets it (downward API): the Lease lives there.
    namespace: str = "default"
    # This process among replicas: the Lease holder's identity and the owner of the nodes
    # streaming to it; the chart names it after the pod.
    replica: ReplicaSettings = ReplicaSettings()
    # PLUMB_VALIDATION_NAMESPACE, as the chart sets it: overrides validation.namespace.
    validation_namespace: str | None = None

    @model_validator(mode="after")
    def _validation_namespace(self) -> AggregatorSettings:
        if self.validation_namespace:
            self.validation = self.validation.model_copy(
                update={"namespace": self.validation_namespace}
            )
        return self
