"""The fleet's change timeline: fact changes across nodes, grouped into events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from plumb.aggregator.api.models import ChangeEventOut
from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.errors import InvalidInput

router = APIRouter(prefix="/v1", tags=["changes"])


@router.get("/changes", response_model=None)
async def list_changes(
    core: CoreDep,
    since: AwareDatetime | None = None,
    until: AwareDatetime | None = None,
    pool: Annotated[str | None, Query(max_length=256)] = None,
    fact: Annotated[str | None, Query(max_length=256)] = None,
    gap_s: Annotated[float, Query(gt=0, le=7 * 86400)] = 1800,
    format: Literal["json", "annotations"] = "json",
) -> list[ChangeEventOut] | list[dict]:
    """Fact changes across the fleet as events, newest first: one fact's transition on the
    nodes of one pool, split where `gap_s` passes with none of them changing. Each event
    names the findings that opened or closed on its nodes and the validations in its window.

    `since` defaults to 24 hours before `until` (default now); `fact` keeps a path and what
    lies under it (`nccl`, `gpus[*].vbios_version`). `format=annotations` answers one
    `{time, timeEnd, title, text, tags}` object an event (epoch milliseconds), the shape
    Grafana's JSON annotation sources map without transformation.
    """
    end = until or datetime.now(UTC)
    start = since or end - timedelta(hours=24)
    if start >= end:
        raise InvalidInput(
            f"since ({start.isoformat()}) is not before until ({end.isoformat()})",
            hint="since is the older end of the window",
        )
    events = await core.changes(start, end, pool=pool, fact=fact, gap=timedelta(seconds=gap_s))
    if format == "annotations":
        return [
            {
                "time": int(e.started_at.timestamp() * 1000),
                "timeEnd": int(e.ended_at.timestamp() * 1000),
                "title": e.summary,
                "text": ", ".join(e.nodes),
                "tags": ["plumb", e.fact, *([e.pool] if e.pool else [])],
            }
            for e in events
        ]
    return [ChangeEventOut.of(e) for e in events]
