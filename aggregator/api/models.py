"""The one JSON shape of each thing the API answers with, built from the core's typed values.

The API returns these; the web page renders their `model_dump(mode="json")`, the same JSON the
CLI reads over HTTP, so a node, a finding or a change looks the same wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from plumb import tree
from plumb.aggregator.core import Overview
from plumb.aggregator.drift import Baseline, DriftFinding
from plumb.aggregator.drift.whatif import Decision, NodeAnswer, PoolAnswer, WhatIf
from plumb.aggregator.gates import Gate, Member
from plumb.aggregator.state.live import NodeState, NodeSummary, Sensors
from plumb.aggregator.store import HistoryEntry
from plumb.aggregator.timeline import ChangeEvent
from plumb.aggregator.validation import ValidationRun
from plumb.facts import Reading

__all__ = [
    "BaselineOut",
    "ChangeEventOut",
    "ChangeOut",
    "FindingOut",
    "GateOut",
    "NodeDetailOut",
    "NodeOut",
    "NodeSummaryOut",
    "SensorsOut",
    "SnapshotNodeOut",
    "WhatIfIn",
    "WhatIfOut",
]


class NodeSummaryOut(BaseModel):
    """The few facts shown per node (state's NodeSummary)."""

    name: str
    connected: bool
    last_report_at: datetime | None
    driver_version: str | None
    cuda_driver_version: str | None
    gpu_count: int
    gpu_product: str | None
    kernel: str | None
    os: str | None

    @classmethod
    def of_summary(cls, s: NodeSummary) -> NodeSummaryOut:
        return cls.model_validate(s, from_attributes=True)


class NodeOut(NodeSummaryOut):
    """A node in lists: its summary, pool, NCCL and CUDA runtime, open findings by severity."""

    # None / empty until the node's recipe is first resolved.
    pool: str | None = None
    nccl_version: str | None = None
    cuda_runtime_version: str | None = None
    findings: dict[str, int] = {}
    drifted: bool = False

    @classmethod
    def of(cls, o: Overview) -> NodeOut:
        return cls(
            **NodeSummaryOut.of_summary(o.summary).model_dump(),
            pool=o.pool,
            nccl_version=o.nccl_version,
            cuda_runtime_version=o.cuda_runtime_version,
            findings=o.findings,
            drifted=o.drifted,
        )


class GpuSensorsOut(BaseModel):
    """One GPU's latest readings; null: not supported by the GPU (or not read)."""

    index: int
    temperature_celsius: int | None
    power_draw_watts: float | None
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    gpu_utilization_ratio: float | None
    memory_utilization_ratio: float | None
    memory_used_bytes: int | None
    # Why the clocks are below their maximum: the active reasons, in NVML's bit order.
    clock_event_reasons: list[str] | None = None
    ecc_corrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    pcie_replay_count: int | None = None
    nvlink_replay_errors: int | None = None
    nvlink_recovery_errors: int | None = None
    nvlink_crc_flit_errors: int | None = None


class SensorsOut(BaseModel):
    """A node's latest sensor readings (not facts: no history, no drift) and when they came."""

    at: datetime
    gpus: list[GpuSensorsOut]

    @classmethod
    def of(cls, sensors: Sensors) -> SensorsOut:
        return cls(at=sensors.at, gpus=[GpuSensorsOut(**g.to_json()) for g in sensors.gpus])


class NodeDetailOut(NodeOut):
    """One node: its overview, identity and every fact, nested, each with its status, and
    its latest sensor readings (null while its agent is not streaming)."""

    boot_id: str | None
    agent_version: str | None
    first_seen_at: datetime | None
    content_hash: str
    # The versions and inventory it runs (state/stack.py) and since when; the
    # plumb.dev/validated-stack label holds its first 16 hex digits.
    stack_hash: str | None = None
    stack_since: datetime | None = None
    facts: dict[str, Any]
    sensors: SensorsOut | None = None

    @classmethod
    def of_node(cls, node: NodeState, o: Overview) -> NodeDetailOut:
        return cls(
            **NodeOut.of(o).model_dump(),
            boot_id=node.boot_id,
            agent_version=node.agent_version,
            first_seen_at=node.first_seen_at,
            content_hash=node.content_hash,
            stack_hash=node.stack_hash or None,
            stack_since=node.stack_since,
            facts=tree.nest(node.facts),
            sensors=SensorsOut.of(node.sensors) if node.sensors else None,
        )


class SnapshotNodeOut(NodeSummaryOut):
    """A node in the cluster snapshot: its summary and nested facts."""

    facts: dict[str, Any]

    @staticmethod
    def json_of(summary: NodeSummary, facts: Mapping[str, Reading]) -> dict[str, Any]:
        """The JSON of one snapshot entry, as the API sends it (rendered off the loop)."""
        out = NodeSummaryOut.of_summary(summary).model_dump(mode="json")
        out["facts"] = tree.nest(facts)
        return out


class ChangeOut(BaseModel):
    """One fact change of a node's history."""

    path: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    at: datetime

    @classmethod
    def of(cls, e: HistoryEntry) -> ChangeOut:
        return cls(
            path=e.path,
            old=e.old.to_json() if e.old else None,
            new=e.new.to_json() if e.new else None,
            at=e.at,
        )


class RunRefOut(BaseModel):
    """A validation run named by a change event: enough to fetch it."""

    id: str
    created_at: datetime
    finished_at: datetime | None
    result: str | None  # None while running

    @classmethod
    def of(cls, r: ValidationRun) -> RunRefOut:
        return cls(id=r.id, created_at=r.created_at, finished_at=r.finished_at, result=r.result)


class ChangeEventOut(BaseModel):
    """One fact transition across nodes of a pool (aggregator/timeline.py)."""

    summary: str
    fact: str
    old: str | None
    new: str | None
    pool: str | None
    nodes: list[str]
    pool_nodes: int | None
    started_at: datetime
    ended_at: datetime
    opened: list[FindingOut]
    closed: list[FindingOut]
    validations: list[RunRefOut]

    @classmethod
    def of(cls, e: ChangeEvent) -> ChangeEventOut:
        return cls(
            summary=e.summary,
            fact=e.fact,
            old=e.old,
            new=e.new,
            pool=e.pool,
            nodes=list(e.nodes),
            pool_nodes=e.pool_nodes,
            started_at=e.started_at,
            ended_at=e.ended_at,
            opened=[FindingOut.of(f) for f in e.opened],
            closed=[FindingOut.of(f) for f in e.closed],
            validations=[RunRefOut.of(r) for r in e.validations],
        )


class FindingOut(BaseModel):
    """A drift finding, open or closed."""

    id: str
    node: str
    kind: str
    component: str
    expected: str
    observed: str
    severity: str
    remediation: str
    recipe_hash: str
    opened_at: datetime
    closed_at: datetime | None

    @classmethod
    def of(cls, f: DriftFinding) -> FindingOut:
        return cls(**{name: getattr(f, name) for name in cls.model_fields})


class BaselineOut(BaseModel):
    """A node's accepted baseline."""

    node: str
    accepted_at: datetime
    gpu_count: int
    facts: dict[str, dict]

    @classmethod
    def of(cls, node: str, base: Baseline) -> BaselineOut:
        return cls(
            node=node,
            accepted_at=base.accepted_at,
            gpu_count=base.gpu_count,
            facts={p: r.to_json() for p, r in sorted(base.facts.items())},
        )


class CanaryOut(BaseModel):
    """A canary of a gate's pool: the stack it runs, the one it passed validation at now and
    before (full stack hashes: the validated-stack label holds the first 16 hex digits), and
    the open findings that say it does not match its twins."""

    node: str
    connected: bool
    stack: str | None
    validated_stack: str | None
    previous_validated_stack: str | None
    blocking: list[FindingOut]

    @classmethod
    def of(cls, m: Member) -> CanaryOut:
        return cls(
            node=m.name,
            connected=m.connected,
            stack=m.stack,
            validated_stack=m.validated,
            previous_validated_stack=m.previous,
            blocking=[FindingOut.of(f) for f in m.blocking],
        )


class GateOut(BaseModel):
    """A pool's rollout gate: `open` or `closed`, every reason it is closed, its canaries,
    their stack and the stack most of the other nodes run."""

    pool: str
    state: str
    reasons: list[str]
    stack: str | None
    pool_stack: str | None
    nodes: int
    canaries: list[CanaryOut]

    @classmethod
    def of(cls, g: Gate) -> GateOut:
        return cls(
            pool=g.pool,
            state=g.state,
            reasons=list(g.reasons),
            stack=g.stack,
            pool_stack=g.pool_stack,
            nodes=g.nodes,
            canaries=[CanaryOut.of(m) for m in g.canaries],
        )


# A component name or pool id is a short key; a plan names a handful of components.
_Key = Annotated[str, Field(max_length=256)]


class WhatIfIn(BaseModel):
    """A planned change: component -> version (the components recipes/drift.yaml `whatif`
    lists: driver, cuda, nccl, gpu-operator, kernel, kubernetes), and the pools it targets
    (`eks/h100/ubuntu/training/any`; every pool when empty)."""

    model_config = ConfigDict(extra="forbid")

    components: dict[_Key, _Key] = Field(
        max_length=32, examples=[{"driver": "590.44.01", "nccl": "2.28.3"}]
    )
    pools: list[_Key] = Field(default=[], max_length=1024)


class DecisionOut(BaseModel):
    """One rule that decides: its verdict, why, where the rule comes from, the fix; `already`
    when it holds on the node's live facts too."""

    rule: str
    verdict: str
    severity: str | None
    reason: str
    source: str
    fix: str
    already: bool

    @classmethod
    def of(cls, d: Decision) -> DecisionOut:
        return cls(**{name: getattr(d, name) for name in cls.model_fields})


class PlannedChangeOut(BaseModel):
    """One component the plan moves on a node: what the node has now, what it would have."""

    component: str
    current: str | None
    planned: str


class NodeWhatIfOut(BaseModel):
    """One node's verdict on the plan, and every rule that decided it, worst first."""

    node: str
    verdict: str
    changes: list[PlannedChangeOut]
    decisions: list[DecisionOut]

    @classmethod
    def of(cls, a: NodeAnswer) -> NodeWhatIfOut:
        return cls(
            node=a.node,
            verdict=a.verdict,
            changes=[PlannedChangeOut(component=c, current=n, planned=p) for c, n, p in a.changes],
            decisions=[DecisionOut.of(d) for d in a.decisions],
        )


class PoolWhatIfOut(BaseModel):
    """A pool's verdict (its worst node's) and its nodes'."""

    pool: str
    verdict: str
    nodes: list[NodeWhatIfOut]

    @classmethod
    def of(cls, p: PoolAnswer) -> PoolWhatIfOut:
        return cls(pool=p.pool, verdict=p.verdict, nodes=[NodeWhatIfOut.of(n) for n in p.nodes])


class WhatIfOut(BaseModel):
    """The answer to a planned change: `safe`, `review` or `blocked`, overall and per pool
    and node."""

    plan: dict[str, str]
    verdict: str
    pools: list[PoolWhatIfOut]

    @classmethod
    def of(cls, w: WhatIf) -> WhatIfOut:
        return cls(
            plan=dict(w.plan), verdict=w.verdict, pools=[PoolWhatIfOut.of(p) for p in w.pools]
        )
