"""Baselines learned from the fleet: what each group of twins measures on each check."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.drift.twins import FleetBaseline

router = APIRouter(prefix="/v1", tags=["baselines"])


class FleetBaselineOut(BaseModel):
    """One group of twins (GPU model, GPU count, fabric) on one check: the median and the
    median absolute deviation of its nodes' latest figures."""

    model: str
    gpus: int
    fabric: str
    check: str
    unit: str
    twins: int
    median: float
    spread: float

    @classmethod
    def of(cls, b: FleetBaseline) -> FleetBaselineOut:
        return cls(**{name: getattr(b, name) for name in cls.model_fields})


@router.get("/baselines")
async def list_baselines(core: CoreDep) -> list[FleetBaselineOut]:
    """Each twin group's baseline per check, by model, GPU count, fabric and check; a group
    shows once enough of its nodes have measured (recipes/drift.yaml `twins.min_twins`)."""
    return [FleetBaselineOut.of(b) for b in await core.baselines()]
