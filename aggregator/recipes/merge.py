"""Field-wise merge of recipe layers (base, overlays, mixins), later layers winning.

Components merge by name, field by field: scalars (version, namespace, enabled) are
overridden when the later layer sets them, ``values`` are deep-merged, ``dependencies`` are
replaced. Constraints merge by name, the later replacing the earlier whole.

The merge is associative as long as every layer gives a values key the same shape (a mapping
everywhere or a scalar everywhere); a key that is a mapping in one layer and a scalar in
another resolves by order alone, which is why overlays never change a key's shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plumb.aggregator.recipes.schema import ComponentPatch, Constraint

__all__ = ["Layer", "deep_merge", "merge", "merge_patch"]


def deep_merge(a: Any, b: Any) -> Any:
    """``b`` over ``a``: mappings merge key by key, anything else is replaced by ``b``."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = dict(a)
        for key, value in b.items():
            out[key] = deep_merge(a[key], value) if key in a else value
        return out
    return b


def merge_patch(a: ComponentPatch, b: ComponentPatch) -> ComponentPatch:
    """What ``a`` then ``b`` say about the same component."""
    if a.values is None or b.values is None:
        values = b.values if a.values is None else a.values
    else:
        values = deep_merge(a.values, b.values)
    return ComponentPatch(
        name=a.name,
        version=b.version if b.version is not None else a.version,
        namespace=b.namespace if b.namespace is not None else a.namespace,
        enabled=b.enabled if b.enabled is not None else a.enabled,
        values=values,
        dependencies=b.dependencies if b.dependencies is not None else a.dependencies,
    )


@dataclass(frozen=True)
class Layer:
    """The mergeable content of an overlay or mixin."""

    components: Mapping[str, ComponentPatch] = field(default_factory=dict)
    constraints: Mapping[str, Constraint] = field(default_factory=dict)

    @classmethod
    def of(
        cls, components: tuple[ComponentPatch, ...], constraints: tuple[Constraint, ...]
    ) -> Layer:
        """The layer of an overlay's or mixin's component and constraint lists."""
        comps: dict[str, ComponentPatch] = {}
        for patch in components:
            comps[patch.name] = (
                merge_patch(comps[patch.name], patch) if patch.name in comps else patch
            )
        return cls(comps, {c.name: c for c in constraints})


def merge(a: Layer, b: Layer) -> Layer:
    """``b`` over ``a``."""
    components = dict(a.components)
    for name, patch in b.components.items():
        components[name] = merge_patch(components[name], patch) if name in components else patch
    return Layer(components, {**a.constraints, **b.constraints})
