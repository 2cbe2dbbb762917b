"""Routes over nodes: list, detail, history, uncordon, and the whole-cluster snapshot."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

import yaml
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import AwareDatetime

from plumb.aggregator.api.access import AdminAccess, identify
from plumb.aggregator.api.models import ChangeOut, NodeDetailOut, NodeOut, SnapshotNodeOut
from plumb.aggregator.api.paced import paced
from plumb.aggregator.api.tokens import Caller
from plumb.aggregator.core import Core

router = APIRouter(prefix="/v1", tags=["nodes"])
# What yaml.safe_dump writes, by libyaml where installed (several times faster).
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def get_core(request: Request) -> Core:
    return request.app.state.core


CoreDep = Annotated[Core, Depends(get_core)]


@router.get("/nodes", response_model=list[NodeOut])
async def list_nodes(
    core: CoreDep,
    pool: Annotated[str | None, Query(max_length=256)] = None,
    drifted: bool | None = None,
) -> Response:
    """Every node that ever reported: stack summary, pool, open findings, connection.

    `pool` keeps one pool (`eks/h100/ubuntu/any/any`); `drifted` keeps nodes with (true)
    or without (false) open drift findings. The rows are the core's cached JSON, joined.
    """
    rows = core.node_rows(pool=pool, drifted=drifted)
    return Response(b"[" + b",".join(r.json for r in rows) + b"]", media_type="application/json")


@router.get("/nodes/{name}")
async def get_node(name: str, core: CoreDep) -> NodeDetailOut:
    """All of one node's facts, nested, each with its status."""
    node = core.node(name)
    return NodeDetailOut.of_node(node, core.overview(node))


@router.delete("/nodes/{name}", dependencies=[AdminAccess])
async def remove_node(name: str, core: CoreDep) -> dict[str, Any]:
    """Forget a node no agent streams for (its history stays unless nodes.keep_history is
    off); 409 while one does."""
    core.remove_node(name)
    return {"node": name, "removed": True}


@router.post("/nodes/{name}/uncordon", dependencies=[AdminAccess])
async def uncordon_node(
    name: str, core: CoreDep, caller: Annotated[Caller | None, Depends(identify)]
) -> dict[str, Any]:
    """Make a Node Plumb cordoned schedulable again; 409 for a node Plumb did not cordon."""
    done = await core.uncordon(name, caller.name if caller else "anonymous")
    return {
        "node": done.node,
        "uncordoned": True,
        "was_unschedulable": done.was_unschedulable,
        "findings": list(done.findings),
        "cordoned_at": done.cordoned_at,
        "by": done.by,
    }


@router.get("/nodes/{name}/history")
async def node_history(
    name: str,
    core: CoreDep,
    since: AwareDatetime | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[ChangeOut]:
    """The node's fact changes, newest first."""
    return [ChangeOut.of(e) for e in await core.history(name, since, limit)]


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
    if format == "aicr":
        docs = await core.aicr_snapshots(node)
        return _sent(await asyncio.to_thread(_aicr_yaml, docs), "application/yaml")
    captured = await core.snapshot(node)
    # Each node's JSON is built as the render thread iterates, not held all at once.
    nodes = (SnapshotNodeOut.json_of(summary, facts) for summary, facts in captured)
    if format == "yaml":
        return _sent(await asyncio.to_thread(_yaml, nodes), "application/yaml")
    return _sent(await asyncio.to_thread(_json, nodes), "application/json")


# Rendered one node at a time: libyaml's emitter and the json encoder are single C calls
# that hold the GIL, so one call over 10,000 nodes would stall the event loop for seconds.
# The pieces are sent as they are, never joined: one 180 MB write would be copied into the
# transport's buffer on the loop.


def _sent(pieces: list[bytes], media_type: str) -> StreamingResponse:
    """The rendered pieces as one response of known length, written with flow control."""
    return paced(pieces, media_type, length=sum(len(p) for p in pieces))


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
