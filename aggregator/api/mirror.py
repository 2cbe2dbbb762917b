"""`GET /v1/mirror`: the charts and images of the recipe for criteria, for air-gapped installs,
as Plumb's list or as Hauler or Zarf documents (aggregator/mirror.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query

from plumb.aggregator.api.nodes import CoreDep
from plumb.aggregator.api.recipes import CriteriaIn
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
    `zarf`, Hauler's Charts and Images for `hauler`. `plumb mirror list` writes them as YAML."""
    resolution = core.recipes.resolve(q.criteria())
    # Reads the manifest components' templates and defaults from the recipe folder.
    listed = await asyncio.to_thread(MirrorList.of, resolution, core.catalog)
    return {"format": q.format, "documents": documents(listed, q.format)}
