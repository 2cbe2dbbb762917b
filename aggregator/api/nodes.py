"""Routes over nodes: list, detail, history, and the whole-cluster snapshot."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import yaml
from fastapi import APIRouter, Depends, Query, Request, Response

from plumb.aggregator.api.access import AdminAccess
from plumb.aggregator.api.models import ChangeOut, NodeDetailOut, NodeOut, SnapshotNodeOut
from plumb.aggregator.core import Core

router = APIRouter(prefix="/v1", tags=["nodes"])


def get_core(request: Request) -> Core:
    return request.app.state.core


CoreDep = Annotated[Core, Depends(get_core)]


@router.get("/nodes")
async def list_nodes(
    core: CoreDep,
    pool: Annotated[str | None, Query(max_length=256)] = None,
    drifted: bool | None = None,
) -> list[NodeOut]:
    """Every node that ever reported: stack summary, pool, open findings, connection.

    `pool` keeps one pool (`eks/h100/ubuntu/any/any`); `drifted` keeps nodes with (true)
    or without (false) open drift findings.
    """
    return [NodeOut.of(o) for o in core.overviews(pool=pool, drifted=drifted)]


@router.get("/nodes/{name}")
async def get_node(name: str, core: CoreDep) -> NodeDetailOut:
    """All of one node's facts, nested, each with its status."""
    node = core.node(name)
    return NodeDetailOut.of_node(node, core.overview(node))


@router.delete("/nodes/{name}", dependencies=[AdminAccess])
async def remove_node(name: str, core: CoreDep) -> dict[str, Any]:
    """Forget a node no agent streams for, with its history and findings; 409 while one does."""
    core.remove_node(name)
    return {"node": name, "removed": True}


@router.get("/nodes/{name}/history")
async def node_history(
    name: str,
    core: CoreDep,
    since: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[ChangeOut]:
    """The node's fact changes, newest first."""
    return [ChangeOut.of(e) for e in await core.history(name, since, limit)]


@router.get("/snapshot", response_model=None)
async def snapshot(
    core: CoreDep,
    format: Literal["json", "yaml", "aicr"] = "json",
    node: Annotated[str | None, Query(max_length=256)] = None,
) -> dict[str, Any] | Response:
    """The whole cluster's facts (or one node's) as JSON or YAML.

    `format=aicr` answers NVIDIA AICR Snapshot YAML: one document per node, `---` apart.
    """
    if format == "aicr":
        docs = core.aicr_snapshots(node)
        text = yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True)
        return Response(text, media_type="application/yaml")
    nodes = [core.node(node)] if node is not None else core.nodes()
    body = {"nodes": [SnapshotNodeOut.of_node(n).model_dump(mode="json") for n in nodes]}
    if format == "yaml":
        return Response(yaml.safe_dump(body, sort_keys=False), media_type="application/yaml")
    return body
