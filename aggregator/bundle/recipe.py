"""A resolved recipe as a bundle reads it: from a Resolution, or from an uploaded recipe.yaml.

An uploaded recipe is checked like any other input: it must parse, name only registry
components, list every deployable component once in ``deployment_order`` after its
dependencies, and, when it carries a ``content_hash``, match it (so an edited recipe is not
passed off as the resolver's output; drop the hash to bundle an edited recipe on purpose).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from plumb.aggregator import untrusted
from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.recipes import Catalog, Resolution

__all__ = ["Recipe", "RecipeComponent", "parse_recipe"]

MAX_COMPONENTS = 200  # the registry has ~25; bounds an uploaded recipe


class RecipeComponent(BaseModel):
    """One component of a resolved recipe."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", max_length=53)
    type: Literal["helm", "manifest", "operand"]
    source: str | None = None
    chart: str | None = None
    version: str | None = None
    namespace: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=63)
    dependencies: tuple[str, ...] = ()
    operand_of: str | None = None
    values: dict[str, Any] = {}

    @model_validator(mode="after")
    def _fields_for_type(self) -> RecipeComponent:
        need = {
            "helm": ("source", "chart", "version", "namespace"),
            "manifest": ("source", "namespace"),
            "operand": ("operand_of",),
        }[self.type]
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a {self.type} component needs {', '.join(missing)}")
        return self


class Recipe(BaseModel):
    """The parts of a resolved recipe a bundle uses; ``document`` keeps all of it verbatim."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    criteria: dict[str, str | int]
    components: tuple[RecipeComponent, ...] = Field(max_length=MAX_COMPONENTS)
    deployment_order: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    content_hash: str
    document: dict[str, Any]

    @classmethod
    def of(cls, resolution: Resolution) -> Recipe:
        """The recipe of a Resolution, as the resolver made it."""
        doc = resolution.to_dict()
        return cls.model_validate({**doc, "document": doc})

    def component(self, name: str) -> RecipeComponent | None:
        """The component called ``name``, if the recipe has it."""
        return next((c for c in self.components if c.name == name), None)

    @model_validator(mode="after")
    def _order(self) -> Recipe:
        deployable = {c.name: c for c in self.components if c.type != "operand"}
        if len(self.deployment_order) != len(set(self.deployment_order)):
            raise ValueError("deployment_order names a component twice")
        if set(self.deployment_order) != set(deployable):
            missing = sorted(set(deployable) - set(self.deployment_order))
            extra = sorted(set(self.deployment_order) - set(deployable))
            raise ValueError(
                f"deployment_order must list every deployable component once "
                f"(missing: {missing or 'none'}; not deployable: {extra or 'none'})"
            )
        seen: set[str] = set()
        for name in self.deployment_order:
            late = [d for d in deployable[name].dependencies if d not in seen]
            if late:
                raise ValueError(f"deployment_order puts {name} before its dependencies {late}")
            seen.add(name)
        return self


def _hash(document: Mapping[str, Any]) -> str:
    """The resolver's content hash: SHA-256 of the canonical JSON of everything but the hash."""
    body = {k: v for k, v in document.items() if k != "content_hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def parse_recipe(data: Mapping[str, Any] | str, catalog: Catalog) -> Recipe:
    """An uploaded recipe (a mapping, or recipe.yaml text); BundleError says what is wrong,
    InvalidInput / TooLarge (aggregator/untrusted.py) which bound the document broke."""
    if isinstance(data, str):
        data = untrusted.load_yaml(data)
    else:
        untrusted.check_tree(data)
    if not isinstance(data, Mapping):
        raise BundleError("recipe does not parse: expected a mapping (the content of recipe.yaml)")
    try:
        document = json.loads(json.dumps(data))
    except (TypeError, ValueError) as exc:
        raise BundleError(f"recipe does not parse: not JSON-compatible: {exc}") from exc
    digest = _hash(document)
    claimed = document.get("content_hash")
    if claimed is not None and claimed != digest:
        raise BundleError(
            "recipe content_hash does not match its content",
            hint="the recipe was edited; remove content_hash to bundle an edited recipe",
        )
    document["content_hash"] = digest
    try:
        recipe = Recipe.model_validate({**document, "document": document})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(recipe)'}: {e['msg']}" for e in exc.errors()
        )
        raise BundleError(f"recipe does not parse: {problems}") from exc
    unknown = sorted(c.name for c in recipe.components if c.name not in catalog.registry)
    if unknown:
        raise BundleError(f"recipe names components the registry lacks: {', '.join(unknown)}")
    return recipe
