"""`GET /v1/mirror`: the charts and images of the recipe for criteria, for air-gapped installs,
as Plumb's list or as Hauler, Zarf or oc-mirror documents (aggregator/mirror.py).
`POST /v1/mirror` takes the recipe route's body instead: criteria, a node (its live facts), an
AICR snapshot, or an AICR RecipeCriteria."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.api.recipes import CriteriaIn, RecipeBody, resolve_request
from plumb.aggregator.mirror import Format, MirrorList, documents
from plumb.aggregator.recipes import Criteria

router = APIRouter(prefix="/v1", tags=["recipes"])


class MirrorQuery(CriteriaIn):
    """The recipe route's criteria, and the shape of the answer."""

    format: Format = "yaml"

    def criteria(self) -> Criteria:
        return Criteria(**self.model_dump(exclude={"format"}))


@router.get("/mirror")
async def mirror(core: CoreDep, q: Annotated[MirrorQuery, Query()]) -> dict[str, Any]:
    """The recipe's charts and images as `documents`: one for `yaml` (Plumb's list) and
    `zarf` and `oc-mirror`, Hauler's Charts and Images for `hauler`. `plumb mirror list` writes
    them as YAML."""
    resolution = core.recipes.resolve(q.criteria())
    # Reads the manifest components' templates and defaults from the recipe folder.
    listed = await asyncio.to_thread(MirrorList.of, resolution, core.catalog)
    return {"format": q.format, "documents": documents(listed, q.format)}


@router.post("/mirror")
async def post_mirror(
    core: CoreDep, request: Annotated[RecipeBody, Body()], format: Format = "yaml"
) -> dict[str, Any]:
    """The charts and images of the recipe `POST /v1/recipe` resolves for the same body (a
    node's live facts, an AICR snapshot, criteria), in `format` as `GET /v1/mirror` gives."""
    resolution = resolve_request(core, request)
    listed = await asyncio.to_thread(MirrorList.of, resolution, core.catalog)
    return {"format": format, "documents": documents(listed, format)}
