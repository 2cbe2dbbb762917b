"""The values enum options accept, checked before any request, with the valid list in the error.

Each list comes from where the server takes it: drift kinds and severities from the drift
model, validation phases from the check catalog, deployers from the bundle options, criteria
from `recipes/` (criteria.yaml, and the accelerators of knowledge/gpus.yaml, as the catalog's
`allowed_values` does). A list is loaded only when a value other than the default is given, so
a command that does not use it does not pay for its import.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

import typer

__all__ = ["criteria", "deployers", "kinds", "one_of", "phases", "severities", "trust_levels"]


def one_of(what: str, valid: Callable[[], tuple[str, ...]], *, default: str | None = None):
    """A Typer `parser` accepting only `valid()` values; `default` passes without loading."""

    def parse(value: str) -> str:
        if value == default:
            return value
        allowed = valid()
        if value not in allowed:
            raise typer.BadParameter(f"unknown {what} {value!r}; valid: {', '.join(allowed)}")
        return value

    return parse


def kinds() -> tuple[str, ...]:
    from plumb.aggregator.drift.model import KINDS

    return KINDS


def severities() -> tuple[str, ...]:
    from plumb.aggregator.drift.model import SEVERITIES

    return SEVERITIES


def phases() -> tuple[str, ...]:
    from plumb.aggregator.recipes.check_catalog import PHASES

    return PHASES


def deployers() -> tuple[str, ...]:
    from plumb.aggregator.bundle import DEPLOYERS

    return DEPLOYERS


def trust_levels() -> tuple[str, ...]:
    """The levels `plumb verify --min-trust-level` may demand (``unknown`` always passes)."""
    from plumb.aggregator.bundle import TRUST_LEVELS

    return TRUST_LEVELS[1:]


def _recipes_root() -> Path:
    """The recipes/ the aggregator reads by default (PLUMB_RECIPES__DIR overrides, as there)."""
    if env := os.environ.get("PLUMB_RECIPES__DIR"):
        return Path(env)
    import plumb.aggregator

    return Path(plumb.aggregator.__file__).resolve().parents[1] / "recipes"


@cache
def _criteria_values() -> dict[str, tuple[str, ...]]:
    """Each criteria key's values, `any` first then sorted, read from the recipe data alone
    (the full catalog's validation is the server's job and costs a second to import)."""
    import yaml

    from plumb.aggregator.untrusted import SAFE_LOADER as loader

    root = _recipes_root()
    table = yaml.load((root / "criteria.yaml").read_text(encoding="utf-8"), Loader=loader)
    gpus = yaml.load((root / "knowledge/gpus.yaml").read_text(encoding="utf-8"), Loader=loader)
    values = {key: table[key] for key in ("service", "os", "intent", "platform")}
    values["accelerator"] = [row["accelerator"] for row in gpus["rows"]]
    return {key: ("any", *sorted(set(v))) for key, v in values.items()}


def criteria(key: str) -> Callable[[], tuple[str, ...]]:
    """The valid values of one criteria key (service, accelerator, os, intent, platform)."""
    return lambda: _criteria_values()[key]
