"""Routes over nodes: list, detail, history, and the whole-cluster snapshot."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Annotated, Any, Literal

import yaml
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import AwareDatetime, BaseModel

from plumb import facts as wire
from plumb.aggregator.core import Core, summary_json
from plumb.aggregator.state.live import NodeSummary

router = APIRouter(prefix="/v1", tags=["nodes"])
# What yaml.safe_dump writes, by libyaml where installed (several times faster).
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


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
    # The node's pool (its resolved criteria), NCCL and CUDA runtime versions, and open drift
    # findings by severity; None / empty until the node's recipe is first resolved.
    pool: str | None = None
    nccl_version: str | None = None
    cuda_runtime_version: str | None = None
    findings: dict[str, int] = {}
    drifted: bool = False


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
async def list_nodes(
    core: CoreDep,
    pool: Annotated[str | None, Query(max_length=256)] = None,
    drifted: bool | None = None,
) -> list[NodeOut]:
    """Every node that ever reported: stack summary, pool, open findings, connection.

    `pool` keeps one pool (`eks/h100/ubuntu/any/any`); `drifted` keeps nodes with (true)
    or without (false) open drift findings.
    """
    return [NodeOut(**row) for row in core.node_rows(pool=pool, drifted=drifted)]


@router.get("/nodes/{name}")
async def get_node(name: str, core: CoreDep) -> NodeDetailOut:
    """All of one node's facts, nested, each with its status."""
    node = core.node(name)
    return NodeDetailOut(
        **summary_json(NodeSummary.of(node)),
        **core.overview(node),
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
    since: AwareDatetime | None = None,
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
    core: CoreDep,
    format: Literal["json", "yaml", "aicr"] = "json",
    node: Annotated[str | None, Query(max_length=256)] = None,
) -> StreamingResponse:
    """The whole cluster's facts (or one node's) as JSON or YAML.

    `format=aicr` answers NVIDIA AICR Snapshot YAML: one document per node, `---` apart.
    Building and rendering run in threads: at 10,000 nodes they take seconds, which on the
    event loop would stall every other request and stream.
    """
    if node is not None:
        core.node(node)
    if format == "aicr":
        docs = await core.aicr_snapshots(node)
        return _sent(await asyncio.to_thread(_aicr_yaml, docs), "application/yaml")
    nodes = await core.snapshot()
    if node is not None:
        nodes = (n for n in nodes if n["name"] == node)
    if format == "yaml":
        return _sent(await asyncio.to_thread(_yaml, nodes), "application/yaml")
    return _sent(await asyncio.to_thread(_json, nodes), "application/json")


# Rendered one node at a time: libyaml's emitter and the json encoder are single C calls
# that hold the GIL, so one call over 10,000 nodes would stall the event loop for seconds.
# The pieces are sent as they are, never joined: one 180 MB write would be copied into the
# transport's buffer on the loop.


def _sent(pieces: list[bytes], media_type: str) -> StreamingResponse:
    """The rendered pieces as one response of known length, written with flow control."""

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    length = str(sum(len(p) for p in pieces))
    return StreamingResponse(body(), media_type=media_type, headers={"Content-Length": length})


def _yaml(nodes: Iterable[dict]) -> list[bytes]:
    """`{"nodes": nodes}` as YAML, node by node (a block sequence may start under its key)."""
    items = [yaml.dump([n], Dumper=_Dumper, sort_keys=False, encoding="utf-8") for n in nodes]
    return [b"nodes:\n", *items] if items else [b"nodes: []\n"]


def _aicr_yaml(docs: Iterable[dict]) -> list[bytes]:
    """One YAML document per node, each opened by `---`."""
    return [
        yaml.dump(d, Dumper=_Dumper, sort_keys=False, explicit_start=True, encoding="utf-8")
        for d in docs
    ]


def _json(nodes: Iterable[dict]) -> list[bytes]:
    """`{"nodes": nodes}` as compact JSON, node by node."""
    pieces = [b'{"nodes":[']
    for i, n in enumerate(nodes):
        text = json.dumps(n, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        pieces.append((b"," if i else b"") + text.encode())
    pieces.append(b"]}")
    return pieces
