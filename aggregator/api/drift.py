"""Routes over drift: open (and closed) findings, and accepting a node's baseline."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import AwareDatetime, BaseModel

from plumb.aggregator.api.access import AdminAccess
from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.drift import DriftFinding

router = APIRouter(prefix="/v1", tags=["drift"])

KindIn = Literal["recipe", "constraint", "baseline", "pool", "health"]
SeverityIn = Literal["critical", "warning", "info"]


class FindingOut(BaseModel):
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
    node: str
    accepted_at: datetime
    gpu_count: int
    facts: dict[str, dict]


@router.get("/drift")
async def list_drift(
    core: CoreDep,
    node: str | None = None,
    kind: KindIn | None = None,
    severity: SeverityIn | None = None,
    component: str | None = None,
    include_closed: bool = False,
    since: AwareDatetime | None = None,
) -> list[FindingOut]:
    """Open drift findings, most severe first; with include_closed, history from the store."""
    filters = {"node": node, "kind": kind, "severity": severity, "component": component}
    if include_closed or since is not None:
        found = await core.all_findings(since=since, **filters)
    else:
        found = core.open_findings(**filters)
    return [FindingOut.of(f) for f in found]


@router.get("/nodes/{name}/drift")
async def node_drift(name: str, core: CoreDep) -> list[FindingOut]:
    """The node's open drift findings."""
    return [FindingOut.of(f) for f in core.open_findings(node=name)]


@router.post("/nodes/{name}/baseline", dependencies=[AdminAccess])
async def accept_baseline(name: str, core: CoreDep) -> BaselineOut:
    """Accept the node's current stack as its baseline; its baseline findings close."""
    base = core.accept_baseline(name)
    return BaselineOut(
        node=name,
        accepted_at=base.accepted_at,
        gpu_count=base.gpu_count,
        facts={p: r.to_json() for p, r in sorted(base.facts.items())},
    )
