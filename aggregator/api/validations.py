"""Routes over validation: start a run, follow it, read it as JSON, CTRF or JUnit."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from plumb.aggregator.api.access import AdminAccess
from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.validation import ctrf, junit, run_json

router = APIRouter(prefix="/v1", tags=["validations"])

PhaseIn = Literal["deployment", "conformance", "performance"]
NodeName = Annotated[str, Field(min_length=1, max_length=253)]
CheckId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]


class ValidationIn(BaseModel):
    """What to validate: every phase, node and check unless narrowed."""

    model_config = ConfigDict(extra="forbid")

    phases: list[PhaseIn] = Field(default_factory=list, max_length=3)
    nodes: list[NodeName] = Field(default_factory=list, max_length=10_000)
    checks: list[CheckId] = Field(default_factory=list, max_length=100)
    # The run's global deadline; checks still out (or still waiting for GPUs) then are
    # reported as `error`. None: validation.default_deadline_s, or the plan's serial bound.
    timeout_s: float | None = Field(None, gt=0, le=24 * 3600)


class Started(BaseModel):
    id: str
    state: str
    nodes: int
    checks: list[str]
    url: str


@router.post("/validations", status_code=202, dependencies=[AdminAccess])
async def start_validation(body: ValidationIn, core: CoreDep) -> Started:
    """Start a validation run across the selected nodes; 202 with its id, poll the url."""
    run = core.validator.start(
        phases=tuple(body.phases),
        nodes=tuple(body.nodes),
        checks=tuple(body.checks),
        deadline_s=body.timeout_s,
    )
    return Started(
        id=run.id,
        state=run.state,
        nodes=len(run.nodes),
        checks=[c.id for c in run.checks],
        url=f"/v1/validations/{run.id}",
    )


@router.get("/validations")
async def list_validations(core: CoreDep) -> list[dict]:
    """Recent runs, newest first, with their progress (no per-check results); stored runs
    too, so runs from before a restart are listed."""
    return [run_json(r, results=False) for r in await core.validations()]


@router.get("/validations/checks")
async def list_checks(core: CoreDep) -> list[dict]:
    """The check catalog (recipes/checks/)."""
    return [c.model_dump() for c in core.catalog.checks.select()]


@router.get("/validations/{run_id}", response_model=None)
async def get_validation(
    run_id: str, core: CoreDep, format: Literal["json", "ctrf", "junit"] = "json"
) -> Response | dict:
    """Progress while running, then every result per node per check; CTRF or JUnit on ask."""
    run = await core.validation(run_id)
    if format == "ctrf":
        return JSONResponse(ctrf(run))
    if format == "junit":
        return Response(junit(run), media_type="application/xml")
    return run_json(run)
