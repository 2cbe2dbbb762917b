"""Routes over recipes: resolve by criteria or from a node's facts, and query one value."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, model_validator

from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.core import Core
from plumb.aggregator.recipes import Criteria, Resolution, select

router = APIRouter(prefix="/v1", tags=["recipes"])
# Criteria values are short keys (`h100`, `ubuntu`); the catalog names the allowed ones.
Dimension = Annotated[str, Field(max_length=64)]


class CriteriaIn(BaseModel):
    """Recipe criteria; each dimension a known value or `any`."""

    model_config = ConfigDict(extra="forbid")

    service: Dimension = "any"
    accelerator: Dimension = "any"
    os: Dimension = "any"
    intent: Dimension = "any"
    platform: Dimension = "any"
    nodes: int = Field(0, ge=0)

    def criteria(self) -> Criteria:
        return Criteria(**self.model_dump())


class RecipeRequest(BaseModel):
    """Resolve for explicit criteria, or for a node from its live facts: exactly one."""

    model_config = ConfigDict(extra="forbid")

    criteria: CriteriaIn | None = None
    node: str | None = Field(default=None, max_length=253)

    @model_validator(mode="after")
    def _one_source(self) -> RecipeRequest:
        if (self.criteria is None) == (self.node is None):
            raise ValueError("give exactly one of `criteria` or `node`")
        return self


def _resolve(core: Core, request: RecipeRequest) -> Resolution:
    if request.node is not None:
        return core.recipe_for_node(request.node)
    assert request.criteria is not None
    return core.recipes.resolve(request.criteria.criteria())


@router.get("/recipe")
async def get_recipe(core: CoreDep, criteria: Annotated[CriteriaIn, Query()]) -> dict[str, Any]:
    """The recipe for these criteria (no node facts: constraints are not evaluated)."""
    return core.recipes.resolve(criteria.criteria()).to_dict()


@router.post("/recipe")
async def post_recipe(core: CoreDep, request: RecipeRequest) -> dict[str, Any]:
    """The recipe for `criteria`, or for `node` from its live facts."""
    return _resolve(core, request).to_dict()


@router.get("/nodes/{name}/recipe")
async def node_recipe(name: str, core: CoreDep) -> dict[str, Any]:
    """The recipe resolved from the node's live facts, with excluded overlays and findings."""
    return core.recipe_for_node(name).to_dict()


class QueryIn(CriteriaIn):
    """A selector into the recipe for criteria, or for `node` from its live facts."""

    selector: str = Field(max_length=256, examples=["components.gpu-operator.version"])
    node: str | None = None

    def criteria(self) -> Criteria:
        return Criteria(**self.model_dump(exclude={"selector", "node"}))


@router.get("/query")
async def query(core: CoreDep, q: Annotated[QueryIn, Query()]) -> dict[str, Any]:
    """One value of a recipe, by a dotted selector (`components.NAME.FIELD...`)."""
    resolution = core.recipe_for_node(q.node) if q.node else core.recipes.resolve(q.criteria())
    return {"selector": q.selector, "value": select(resolution.to_dict(), q.selector)}
