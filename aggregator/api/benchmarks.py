"""Routes over external benchmarks: attach a nccl-tests log run elsewhere, list attached runs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from plumb.aggregator.api.access import AdminAccess
from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.validation import run_json
from plumb.aggregator.validation.benchmarks import recorded

router = APIRouter(prefix="/v1", tags=["benchmarks"])

NodeName = Annotated[str, Field(min_length=1, max_length=253)]


class BenchmarkIn(BaseModel):
    """A nccl-tests log (text or -J JSON) and, where its hosts are not node names, the nodes."""

    model_config = ConfigDict(extra="forbid")

    # Under the HTTP body limit (1 MiB by default); a 16-rank run's table is a few KiB.
    log: str = Field(min_length=1, max_length=1_000_000)
    nodes: list[NodeName] = Field(default_factory=list, max_length=1000)


@router.post("/benchmarks", status_code=201, dependencies=[AdminAccess])
async def attach_benchmark(body: BenchmarkIn, core: CoreDep) -> list[dict]:
    """Attach each run of the log to the nodes it ran on, graded like the built-in check."""
    runs = await core.attach_benchmark(body.log, tuple(body.nodes))
    return [run_json(r) for r in runs]


@router.get("/benchmarks")
async def list_benchmarks(core: CoreDep) -> list[dict]:
    """Attached benchmark runs held in memory, newest first, with their results."""
    return [run_json(r) for r in recorded(core.validator.recent())]
