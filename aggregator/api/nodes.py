"""Routes over nodes: list, detail, history, and the whole-cluster snapshot."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import yaml
from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel

from aggregator.core import Core, summary_json
from aggregator.state import NodeSummary
from plumb import facts as wire

router = APIRouter(prefix="/v1", tags=["nodes"])


def get_core(request: Request) -> Core:
    return request.app.state.core


CoreDep = Annotated[Core, Depends(get_core)]


class NodeOut(BaseModel):
    name: str
    connected: bool
    last_report_at: datetime | None
    driver_version: str | None
    cuda_driver_version: str | None
    gpu_count: int
    gpu_product: str | None
    kernel: str | None
    os: str | None


class NodeDetailOut(NodeOut):
    boot_id: str | None
    agent_version: str | None
    first_seen_at: datetime | None
    content_hash: str
    facts: dict[str, Any]


class ChangeOut(BaseModel):
    path: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    at: datetime


@router.get("/nodes")
async def list_nodes(core: CoreDep) -> list[NodeOut]:
    """Every node that ever reported, with its stack summary and connection."""
    return [NodeOut(**summary_json(s)) for s in core.nodes()]


@router.get("/nodes/{name}")
async def get_node(name: str, core: CoreDep) -> NodeDetailOut:
    """All of one node's facts, nested, each with its status."""
    node = core.node(name)
    return NodeDetailOut(
        **summary_json(NodeSummary.of(node)),
        boot_id=node.boot_id,
        agent_version=node.agent_version,
        first_seen_at=node.first_seen_at,
        content_hash=node.content_hash,
        facts=wire.nest(node.facts),
    )


@router.get("/nodes/{name}/history")
async def node_history(
    name: str,
    core: CoreDep,
    since: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[ChangeOut]:
    """The node's fact changes, newest first."""
    entries = await core.history(name, since, limit)
    return [
        ChangeOut(
            path=e.path,
            old=e.old.to_json() if e.old else None,
            new=e.new.to_json() if e.new else None,
            at=e.at,
        )
        for e in entries
    ]


@router.get("/snapshot", response_model=None)
async def snapshot(
    core: CoreDep, format: Literal["json", "yaml"] = "json"
) -> dict[str, Any] | Response:
    """The whole cluster's facts, as JSON or YAML."""
    body = core.snapshot()
    if format == "yaml":
        return Response(yaml.safe_dump(body, sort_keys=False), media_type="application/yaml")
    return body
