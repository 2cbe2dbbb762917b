"""Routes over drift: open (and closed) findings, and accepting a node's baseline."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import AwareDatetime

from plumb.aggregator.api.access import AdminAccess
from plumb.aggregator.api.models import BaselineOut, FindingOut
from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.drift.model import Kind

router = APIRouter(prefix="/v1", tags=["drift"])

KindIn = Kind
SeverityIn = Literal["critical", "warning", "info"]


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
    return BaselineOut.of(name, core.accept_baseline(name))
