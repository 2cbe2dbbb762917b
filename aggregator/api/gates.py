"""Rollout gates: may a rollout go on from a pool's canaries to the rest of the pool?

A pool id holds slashes (`eks/h100/ubuntu/training/any`), so the route takes the rest of the
path as the pool: `GET /v1/gates/eks/h100/ubuntu/training/any`. Either state answers 200;
the body's `state` is `open` or `closed` (with `reasons`), and an unknown pool is a 404.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from plumb.aggregator.api.models import GateOut
from plumb.aggregator.api.nodes import CoreDep

router = APIRouter(prefix="/v1", tags=["gates"])


@router.get("/gates")
async def list_gates(core: CoreDep) -> list[GateOut]:
    """Every pool's gate, by pool."""
    return [GateOut.of(g) for g in core.gates.all()]


@router.get("/gates/{pool:path}")
async def get_gate(pool: Annotated[str, Path(max_length=256)], core: CoreDep) -> GateOut:
    """The pool's gate: open once its canary nodes (the canary label) run a new stack, passed
    validation at it and have no open health or straggler finding; closed with why, else."""
    return GateOut.of(core.gates.gate(pool))
