"""The catalog's overlays, each with its criteria and whether asking for them resolves.

What `plumb recipe list` shows (AICR's `recipe list`): an overlay that cannot be reached by
its own criteria, or whose resolution fails or warns, is found before a user asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from plumb.aggregator.errors import PlumbError
from plumb.aggregator.recipes.catalog import CRITERIA_KEYS, Catalog
from plumb.aggregator.recipes.criteria import Criteria
from plumb.aggregator.recipes.resolve import resolve

__all__ = ["OverlayHealth", "list_overlays"]


@dataclass(frozen=True)
class OverlayHealth:
    """One overlay: what it pins, and the recipe its own criteria resolve to."""

    name: str
    base: str | None
    criteria: dict[str, str | int]  # only the pinned keys (and nodes when set)
    mixins: tuple[str, ...]
    resolves: bool
    components: int
    warnings: tuple[str, ...]
    problem: str | None

    def to_dict(self) -> dict[str, object]:
        """The row as a plain dict."""
        return {
            "name": self.name,
            "base": self.base,
            "criteria": dict(self.criteria),
            "mixins": list(self.mixins),
            "resolves": self.resolves,
            "components": self.components,
            "warnings": list(self.warnings),
            "problem": self.problem,
        }


def list_overlays(catalog: Catalog) -> list[OverlayHealth]:
    """Every overlay by name, resolved for its own criteria (without node facts).

    It resolves when that resolution succeeds and applies the overlay itself; ``base`` is the
    recipe of ``any`` and so always carries the base-only warning.
    """
    out = []
    for name in sorted(catalog.overlays):
        overlay = catalog.overlays[name]
        pinned: dict[str, str | int] = {
            k: getattr(overlay.criteria, k)
            for k in CRITERIA_KEYS
            if getattr(overlay.criteria, k) != "any"
        }
        if overlay.criteria.nodes:
            pinned["nodes"] = overlay.criteria.nodes
        problem, components, warnings = None, 0, ()
        try:
            resolution = resolve(catalog, Criteria(**pinned))  # type: ignore[arg-type]
        except PlumbError as exc:
            problem = str(exc)
        else:
            components, warnings = len(resolution.deployment_order), resolution.warnings
            if name not in resolution.applied:
                problem = "its own criteria do not apply it"
        out.append(
            OverlayHealth(
                name=name,
                base=overlay.base,
                criteria=pinned,
                mixins=overlay.mixins,
                resolves=problem is None,
                components=components,
                warnings=tuple(warnings),
                problem=problem,
            )
        )
    return out
