"""What a benchmark figure was measured on: the node's stack hash (state/stack.py, the one
the validated-stack label and the rollout gates use) and its twin group. The group (GPU model,
GPU count, fabric) says which nodes are twins, whose figures are compared with each other.
"""

from __future__ import annotations

from collections.abc import Mapping

from plumb.aggregator.recipes import Catalog
from plumb.aggregator.recipes.checks import evaluate
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.state.stack import stack_hash
from plumb.aggregator.validation.model import Stack
from plumb.facts import Reading

__all__ = ["Stack", "stack_of"]


def stack_of(facts: Mapping[str, Reading], catalog: Catalog) -> Stack | None:
    """The stack and twin group of a node with `facts`; None when it reports no GPU."""
    view = NodeView.from_facts(facts, catalog.gpu_identity)
    count = view.one("gpu.count")
    if count is None:
        return None
    models = view.get("gpu.model") or view.get("gpu.product")
    rules = catalog.drift.twins
    fabric = next(
        (f.name for f in rules.fabrics if evaluate(f.when, view).status == "pass"),
        rules.default_fabric,
    )
    return Stack(
        hash=stack_hash(facts, catalog.drift.baseline.paths),
        model=", ".join(models) if models else "unknown GPU",
        gpus=int(count),
        fabric=fabric,
    )
