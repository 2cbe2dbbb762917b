"""Routes over recipes: resolve by criteria, from a node's facts or from an AICR snapshot, and
query one value. `POST /v1/recipe` also takes AICR's own `RecipeCriteria` body."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from plumb.aggregator.aicr import criteria_from_recipe_criteria, resolve_snapshot
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
    """Resolve for explicit criteria, for a node from its live facts, or for an AICR Snapshot
    (its criteria, each of `criteria` other than `any` overriding them): one source."""

    model_config = ConfigDict(extra="forbid")

    criteria: CriteriaIn | None = None
    node: str | None = Field(default=None, max_length=253)
    snapshot: dict[str, Any] | None = Field(
        default=None, description="an AICR Snapshot document (kind: Snapshot), as JSON"
    )

    @model_validator(mode="after")
    def _one_source(self) -> RecipeRequest:
        given = sum(x is not None for x in (self.criteria, self.node, self.snapshot))
        if given != 1 and not (given == 2 and self.criteria and self.snapshot):
            raise ValueError(
                "give exactly one of `criteria`, `node` or `snapshot` (or `snapshot` with"
                " `criteria` overriding it)"
            )
        return self


class RecipeCriteriaIn(BaseModel):
    """NVIDIA AICR's RecipeCriteria body (`aicr recipe -c`, AICR's `POST /v1/recipe`)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(max_length=64, examples=["RecipeCriteria"])
    apiVersion: str | None = Field(default=None, max_length=64, examples=["aicr.run/v1alpha2"])
    metadata: dict[str, Any] | None = None
    spec: dict[str, Any] | None = None


def _body_kind(body: Any) -> str:
    """AICR documents carry `kind`; Plumb's own body never does."""
    return "aicr" if isinstance(body, dict) and "kind" in body else "plumb"


RecipeBody = Annotated[
    Annotated[RecipeRequest, Tag("plumb")] | Annotated[RecipeCriteriaIn, Tag("aicr")],
    Discriminator(_body_kind),
]


def resolve_request(core: Core, request: RecipeRequest | RecipeCriteriaIn) -> Resolution:
    """The resolution a recipe body asks for (shared by `POST /v1/recipe` and `/v1/mirror`)."""
    if isinstance(request, RecipeCriteriaIn):
        spec = criteria_from_recipe_criteria(request.model_dump(exclude_none=True))
        return core.recipes.resolve(Criteria(**spec))
    if request.node is not None:
        return core.recipe_for_node(request.node)
    if request.snapshot is not None:
        overrides = request.criteria.model_dump() if request.criteria else {}
        return resolve_snapshot(core.recipes, request.snapshot, overrides)
    assert request.criteria is not None
    return core.recipes.resolve(request.criteria.criteria())


@router.get("/recipe")
async def get_recipe(core: CoreDep, criteria: Annotated[CriteriaIn, Query()]) -> dict[str, Any]:
    """The recipe for these criteria (no node facts: constraints are not evaluated)."""
    return core.recipes.resolve(criteria.criteria()).to_dict()


@router.post("/recipe")
async def post_recipe(core: CoreDep, request: Annotated[RecipeBody, Body()]) -> dict[str, Any]:
    """The recipe for `criteria`, for `node` from its live facts, for an AICR `snapshot`, or
    for an AICR RecipeCriteria body (`kind`, `apiVersion`, `metadata`, `spec`)."""
    return resolve_request(core, request).to_dict()


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


class NestedQueryIn(BaseModel):
    """AICR's `POST /v1/query` body: the criteria nested under `criteria`, and a selector."""

    model_config = ConfigDict(extra="forbid")

    criteria: CriteriaIn = CriteriaIn()
    selector: str = Field(max_length=256, examples=["components.gpu-operator.version"])

    def flat(self) -> QueryIn:
        return QueryIn(selector=self.selector, **self.criteria.model_dump())


def _query_kind(body: Any) -> str:
    return "nested" if isinstance(body, dict) and "criteria" in body else "flat"


QueryBody = Annotated[
    Annotated[QueryIn, Tag("flat")] | Annotated[NestedQueryIn, Tag("nested")],
    Discriminator(_query_kind),
]


def _answer(core: Core, q: QueryIn) -> dict[str, Any]:
    resolution = core.recipe_for_node(q.node) if q.node else core.recipes.resolve(q.criteria())
    return {"selector": q.selector, "value": select(resolution.to_dict(), q.selector)}


@router.get("/query")
async def query(core: CoreDep, q: Annotated[QueryIn, Query()]) -> dict[str, Any]:
    """One value of a recipe, by a dotted selector (`components.NAME.FIELD...`)."""
    return _answer(core, q)


@router.post("/query")
async def post_query(core: CoreDep, body: Annotated[QueryBody, Body()]) -> dict[str, Any]:
    """The query of `GET /v1/query` as a JSON body: its parameters as fields, or AICR's shape
    (`{"criteria": {...}, "selector": ...}`)."""
    return _answer(core, body.flat() if isinstance(body, NestedQueryIn) else body)
