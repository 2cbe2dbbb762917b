"""``POST /v1/bundles``: a resolved recipe packaged for a deploy tool, as an archive."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field

from plumb.aggregator.api.nodes import get_core
from plumb.aggregator.api.recipes import CriteriaIn
from plumb.aggregator.bundle import BundleOptions
from plumb.aggregator.core import Core

router = APIRouter(prefix="/v1", tags=["bundles"])

CoreDep = Annotated[Core, Depends(get_core)]
Texts = Annotated[list[Annotated[str, Field(max_length=1024)]], Field(max_length=256)]
# A --set-json value or a --set-file text: a chart's config snippet is a few KiB; the
# request body limit (http_max_body_bytes) bounds their sum.
Blobs = Annotated[list[Annotated[str, Field(max_length=256 << 10)]], Field(max_length=64)]
FileTexts = Annotated[
    dict[Annotated[str, Field(max_length=1024)], Annotated[str, Field(max_length=256 << 10)]],
    Field(max_length=64),
]
MEDIA = {"tar.gz": "application/gzip", "zip": "application/zip"}


class ChartIn(BaseModel):
    """Make the bundle a Helm chart of this name and version (for ``oci://`` output)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=63)
    version: str = Field(max_length=128)


class BundleIn(BaseModel):
    """Exactly one of ``criteria``, ``node`` or ``recipe`` (a recipe.yaml, as text or object)."""

    model_config = ConfigDict(extra="forbid")

    criteria: CriteriaIn | None = None
    node: str | None = Field(default=None, max_length=253)
    recipe: dict[str, Any] | Annotated[str, Field(max_length=1_000_000)] | None = None
    deployer: str = "helm"
    set: Texts = []
    set_json: Blobs = []
    set_file: FileTexts = Field(default={}, description="component:path -> the file's text")
    nodes: int = Field(default=0, ge=0, le=100_000, description="expected GPU nodes; 0 unset")
    storage_class: str | None = Field(default=None, max_length=253)
    dynamic: Texts = Field(default=[], description="component:path, given at install time")
    vendor_charts: bool = Field(
        default=False,
        description="carry each chart's .tgz; built by `plumb bundle --vendor-charts` only,"
        " which pulls them where it runs",
    )
    readiness_hooks: bool = Field(
        default=False, description="wait for each release's workloads before the next"
    )
    chart: ChartIn | None = None
    system_node_selector: Texts = []
    system_tolerations: Texts = []
    accelerated_node_selector: Texts = []
    accelerated_tolerations: Texts = []
    repo_url: str | None = Field(default=None, max_length=2048)
    repo_branch: str = Field(default="main", max_length=255)
    format: Literal["tar.gz", "zip"] = "tar.gz"

    def options(self) -> BundleOptions:
        """The deployer and its options, checked (InvalidInput names what is wrong)."""
        return BundleOptions.parse(
            self.deployer,
            set=self.set,
            set_json=self.set_json,
            set_file=self.set_file,
            nodes=self.nodes,
            storage_class=self.storage_class,
            dynamic=self.dynamic,
            vendor_charts=self.vendor_charts,
            readiness_hooks=self.readiness_hooks,
            chart=(self.chart.name, self.chart.version) if self.chart else None,
            system_node_selector=self.system_node_selector,
            system_tolerations=self.system_tolerations,
            accelerated_node_selector=self.accelerated_node_selector,
            accelerated_tolerations=self.accelerated_tolerations,
            repo_url=self.repo_url,
            repo_branch=self.repo_branch,
        )


@router.post(
    "/bundles",
    response_class=Response,
    responses={200: {"content": {m: {} for m in MEDIA.values()}}},
)
async def create_bundle(body: BundleIn, core: CoreDep) -> Response:
    """The bundle as an archive; headers give its file count, size and SHA-256."""
    bundle = await core.bundle(
        body.options(),
        node=body.node,
        criteria=body.criteria.criteria() if body.criteria is not None else None,
        recipe=body.recipe,
    )
    data = await asyncio.to_thread(bundle.archive, body.format)  # gzip level 9: CPU-bound
    return Response(
        data,
        media_type=MEDIA[body.format],
        headers={
            "Content-Disposition": f'attachment; filename="{bundle.name}.{body.format}"',
            "X-Bundle-Files": str(len(bundle.files)),
            "X-Bundle-Size": str(len(data)),
            "X-Bundle-Sha256": hashlib.sha256(data).hexdigest(),
        },
    )
