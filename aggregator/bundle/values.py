"""Each release's final values: recipe values, then placement, then the user's overrides.

An operand's values (the driver's, the toolkit's) merge into its parent chart's values under
the registry's ``values_key``. Placement (node selectors, tolerations, ``--nodes``,
``--storage-class``) goes only to the value paths the registry declares for a component, so
a chart never gets a key it does not read. Overrides then apply in Helm's order:
``--set-json``, ``--set``, ``--set-file``. A ``--set`` may only change a single value that
exists, and a ``--set-json``/``--set-file`` path must lead through maps that exist (its last
key may be new), so a typo fails loudly instead of being ignored by the chart. An override of
an operand (``driver:version=...``) lands in its parent chart's values. Last, each
``--dynamic`` path is taken out of the values (``take_dynamic``): the deployer reads it at
install time.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plumb.aggregator import untrusted
from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.bundle.options import BundleOptions, Dynamic, Merge, Override
from plumb.aggregator.bundle.recipe import Recipe
from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.recipes import Catalog

__all__ = ["DynamicValue", "release_values", "take_dynamic"]


@dataclass(frozen=True)
class DynamicValue:
    """A value of a release left for install time: where it goes, and what supplies it.

    ``env`` is the environment variable the helm and helmfile deployers read it from (the
    release and path, upper case, ``_`` for anything else); ``text`` says the value the recipe
    had there was a string, so it is passed literally rather than parsed as a number or bool.
    """

    path: tuple[str, ...]
    env: str
    text: bool

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def release_values(
    recipe: Recipe,
    catalog: Catalog,
    options: BundleOptions,
    defaults: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Final values of every deployable component, by name; ``defaults`` sit under the recipe's."""
    out: dict[str, dict[str, Any]] = {}
    for name in recipe.deployment_order:
        comp = recipe.component(name)
        assert comp is not None
        values = _merge(copy.deepcopy(dict(defaults.get(name, {}))), comp.values)
        for operand in recipe.components:
            if operand.type == "operand" and operand.operand_of == name and operand.values:
                _merge(values.setdefault(_values_key(catalog, operand.name), {}), operand.values)
        scheduling = catalog.registry[name].node_scheduling
        for kind in ("system", "accelerated"):
            selector, tolerations = options.placement(kind)
            paths = getattr(scheduling, kind)
            if selector:
                for path in paths.node_selector_paths:
                    _put(values, path.split("."), dict(selector))
            if tolerations:
                for path in paths.toleration_paths:
                    _put(values, path.split("."), copy.deepcopy(tolerations))
        if options.nodes:
            for path in scheduling.node_count_paths:
                _put(values, path.split("."), options.nodes)
        if options.storage_class:
            for path in catalog.registry[name].storage_class_paths:
                _put(values, path.split("."), options.storage_class)
        out[name] = values
    for merge in options.json_merges:
        target, path = _target(recipe, catalog, merge)
        _merge_at(out[target], path, merge)
    for override in options.overrides:
        target, path = _target(recipe, catalog, override)
        _override(out[target], path, override)
    for merge in options.file_merges:
        target, path = _target(recipe, catalog, merge)
        _merge_at(out[target], path, merge)
    return out


def take_dynamic(
    values: dict[str, dict[str, Any]], recipe: Recipe, catalog: Catalog, options: BundleOptions
) -> dict[str, tuple[DynamicValue, ...]]:
    """Remove each ``--dynamic`` path from ``values`` (the final values by release); what each
    release must be given at install time. The path must lead through maps that exist and end
    at a single value or a new key, so a typo fails here rather than at install."""
    out: dict[str, list[DynamicValue]] = {}
    owners: dict[str, Dynamic] = {}
    for dynamic in options.dynamic:
        target, path = _target(recipe, catalog, dynamic)
        node = _parent_map(values[target], path, f"--dynamic {dynamic}", dynamic.component)
        old = node.pop(path[-1], None)
        if isinstance(old, dict | list):
            raise BundleError(
                f"--dynamic {dynamic}: {'.'.join(path)!r} is a {type(old).__name__}, not a "
                "single value",
                hint="make one of its keys dynamic",
            )
        env = re.sub(r"[^A-Z0-9]+", "_", f"{target}_{'_'.join(path)}".upper())
        if env in owners:
            raise BundleError(
                f"--dynamic {dynamic} and --dynamic {owners[env]} both read ${env}",
                hint="give each install-time value once",
            )
        owners[env] = dynamic
        out.setdefault(target, []).append(DynamicValue(path, env, isinstance(old, str)))
    return {name: tuple(found) for name, found in out.items()}


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _put(values: dict[str, Any], path: list[str], value: Any) -> None:
    node = values
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


def _target(
    recipe: Recipe, catalog: Catalog, override: Override | Merge | Dynamic
) -> tuple[str, tuple[str, ...]]:
    """The deployable component whose values an override changes, and the path in them."""
    comp = recipe.component(override.component)
    if comp is None:
        have = ", ".join(sorted(c.name for c in recipe.components))
        flag = "--set" if isinstance(override, Override) else override.flag
        raise BundleError(
            f"{flag} {override}: component {override.component!r} is not in this recipe",
            hint=f"components: {have}",
        )
    if comp.type != "operand":
        return comp.name, override.path
    return comp.operand_of or "", (_values_key(catalog, comp.name), *override.path)


def _values_key(catalog: Catalog, operand: str) -> str:
    """Where an operand's settings live in its parent chart's values."""
    return catalog.registry[operand].values_key or operand


def _override(values: dict[str, Any], path: tuple[str, ...], override: Override) -> None:
    node: Any = values
    for depth, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            where = ".".join(path[:depth]) or "(top level)"
            keys = ", ".join(sorted(node)) if isinstance(node, dict) else "none (not a map)"
            raise BundleError(
                f"--set {override}: {override.component} has no value "
                f"{'.'.join(path[: depth + 1])!r}",
                hint=f"keys at {where}: {keys}",
            )
        if depth < len(path) - 1:
            node = node[key]
    old = node[path[-1]]
    if isinstance(old, dict | list):
        raise BundleError(
            f"--set {override}: {'.'.join(path)!r} is a {type(old).__name__}, not a single value",
            hint="set one of its keys",
        )
    node[path[-1]] = _coerce(old, override)


def _parent_map(
    values: dict[str, Any], path: tuple[str, ...], flag: str, component: str, more: str = ""
) -> dict[str, Any]:
    """The map holding ``path``'s last key, through maps that exist; BundleError naming the
    first missing one and the keys beside it (``more`` ends the hint)."""
    node = values
    for depth, key in enumerate(path[:-1]):
        if not isinstance(node.get(key), dict):
            where = ".".join(path[:depth]) or "(top level)"
            raise BundleError(
                f"{flag}: {component} has no map {'.'.join(path[: depth + 1])!r}",
                hint=f"keys at {where}: {', '.join(sorted(node)) or 'none'}{more}",
            )
        node = node[key]
    return node


def _merge_at(values: dict[str, Any], path: tuple[str, ...], merge: Merge) -> None:
    """Put ``merge.value`` at ``path``: a map deep-merges into a map there, all else replaces."""
    node = _parent_map(
        values,
        path,
        f"{merge.flag} {merge}",
        merge.component,
        "; a new subtree is set one level up, as a JSON object",
    )
    last = path[-1]
    if isinstance(merge.value, Mapping) and isinstance(node.get(last), dict):
        _merge(node[last], merge.value)
    else:
        node[last] = copy.deepcopy(merge.value)


def _coerce(old: Any, override: Override) -> Any:
    """The override's text as the type of the value it replaces (text stays text: ``1.20``)."""
    text = override.value
    if isinstance(old, str):
        return text
    if isinstance(old, bool):
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
    elif isinstance(old, int):
        try:
            return int(text)
        except ValueError:
            pass
    elif isinstance(old, float):
        try:
            return float(text)
        except ValueError:
            pass
    else:
        try:
            loaded = untrusted.load_yaml(text) if text else None
        except InvalidInput:  # not YAML at all: the text itself is the value
            loaded = text
        return loaded if isinstance(loaded, bool | int | float | type(None)) else text
    raise BundleError(f"--set {override}: {text!r} is not a {type(old).__name__}, as the value is")
