"""What-if before a rollout: a planned change judged on every targeted node's live facts."""

from __future__ import annotations

from fastapi import APIRouter

from plumb.aggregator.api.models import WhatIfIn, WhatIfOut
from plumb.aggregator.api.nodes import CoreDep

router = APIRouter(prefix="/v1", tags=["whatif"])


@router.post("/whatif")
async def whatif(core: CoreDep, plan: WhatIfIn) -> WhatIfOut:
    """Judge a planned change (component versions, optionally the pools it targets) by the
    rules drift runs, on each node's live facts with the planned versions in place: `safe`,
    `review` or `blocked` per pool and node, with every rule that decided, its source and
    its fix. Reads only: the read scope suffices."""
    answer = await core.whatif(plan.components, tuple(dict.fromkeys(plan.pools)))
    return WhatIfOut.of(answer)
