"""What a benchmark figure was measured on: the node's stack digest and its twin group.

The stack hash is a digest of the node's stack facts alone, the versions its baseline keeps
(`baseline.paths` in recipes/drift.yaml: driver, CUDA, NCCL, kernel, OS, kubelet, container
runtime, GPU firmware), never sensors, serials or UUIDs: twins on one stack share it, and it
moves exactly when someone changes the stack. The group (GPU model, GPU count, fabric) says
which nodes are twins, whose figures are compared with each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from plumb.aggregator.recipes import Catalog
from plumb.aggregator.recipes.checks import evaluate
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.validation.model import Stack
from plumb.facts import Reading, content_hash

__all__ = ["Stack", "stack_hash", "stack_of"]

_INDEX = re.compile(r"\[\d+\]")


def stack_hash(facts: Mapping[str, Reading], catalog: Catalog) -> str:
    """The content hash of the node's stack facts (the baseline's paths)."""
    paths = set(catalog.drift.baseline.paths)
    return content_hash({p: r for p, r in facts.items() if _INDEX.sub("[]", p) in paths})


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
        hash=stack_hash(facts, catalog),
        model=", ".join(models) if models else "unknown GPU",
        gpus=int(count),
        fabric=fabric,
    )
