"""One GPU as every reader sees it: a node's `gpus[i].<leaf>` facts, grouped once.

Recipes, drift, metrics, validation grading and the AICR export all read per-GPU facts; they
read them here instead of rebuilding `gpus[{i}].name` paths each. `NodeState.gpus()` memoises
the views per facts version; `gpu_views(facts)` serves readers that hold only a facts
mapping, and remembers the last few it grouped (state/memo.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from plumb.aggregator.state.memo import last_few
from plumb.aggregator.state.shape import shape
from plumb.facts import Reading, Scalar

__all__ = ["GpuView", "gpu_views"]


class GpuView:
    """GPU `index`: its readings by leaf name (`name`, `uuid`, `pcie_link_width_max`...),
    read from the node's facts through the paths its shape found for that GPU."""

    __slots__ = ("_facts", "_paths", "index")

    def __init__(self, index: int, facts: Mapping[str, Reading], paths: Mapping[str, str]):
        self.index = index
        self._facts = facts
        self._paths = paths  # leaf -> path, shared by every node of the shape

    @property
    def readings(self) -> dict[str, Reading]:
        """Every leaf's reading."""
        return {leaf: self._facts[path] for leaf, path in self._paths.items()}

    def value(self, leaf: str) -> Scalar | None:
        """The leaf's value when it was read successfully, else None."""
        path = self._paths.get(leaf)
        r = None if path is None else self._facts[path]
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
    return tuple(GpuView(i, facts, paths) for i, paths in enumerate(shape(facts).gpus))
