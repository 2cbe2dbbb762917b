"""One GPU as every reader sees it: a node's `gpus[i].<leaf>` facts, grouped once.

Recipes, drift, metrics, validation grading and the AICR export all read per-GPU facts; they
read them here instead of rebuilding `gpus[{i}].name` paths each. `NodeState.gpus()` memoises
the views per facts version; `gpu_views(facts)` serves readers that hold only a facts
mapping, and remembers the last few it grouped (state/memo.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plumb.aggregator.state.memo import last_few
from plumb.aggregator.state.shape import shape
from plumb.facts import Reading, Scalar

__all__ = ["GpuView", "gpu_views"]


@dataclass(frozen=True)
class GpuView:
    """GPU `index`: its readings by leaf name (`name`, `uuid`, `pcie_link_width_max`...)."""

    index: int
    readings: Mapping[str, Reading]

    def value(self, leaf: str) -> Scalar | None:
        """The leaf's value when it was read successfully, else None."""
        r = self.readings.get(leaf)
        return r.value if r is not None and r.status == "ok" else None

    def text(self, leaf: str) -> str | None:
        """The leaf's value as text, or None."""
        v = self.value(leaf)
        return None if v is None else str(v)

    def number(self, leaf: str) -> float | None:
        """The leaf's numeric value (not a bool or text), or None."""
        v = self.value(leaf)
        return None if v is None or isinstance(v, bool | str) else float(v)


@last_few
def gpu_views(facts: Mapping[str, Reading]) -> tuple[GpuView, ...]:
    """The node's GPUs, by index: as many as `gpu_count` counts (each has its index)."""
    return tuple(
        GpuView(i, {leaf: facts[path] for leaf, path in gpu})
        for i, gpu in enumerate(shape(facts).gpus)
    )
