"""Drift: desired (recipe, knowledge, baseline, pool) against observed facts, continuously.

Pure evaluation in `evaluate`, open/close bookkeeping in `engine`; no web or database code.
The vocabulary (`model`: kinds, severities, findings) loads with the package; the engine and
the evaluation, which need the recipes, load when first named, so a reader of severities
alone (the CLI's tables) does not import the recipe catalog.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from plumb.aggregator.drift.model import KINDS, SEVERITIES, DriftFinding, Observation

if TYPE_CHECKING:
    from plumb.aggregator.drift.engine import Baseline, DriftEngine, Transitions
    from plumb.aggregator.drift.evaluate import PoolTally, pool_majorities

_LAZY = {
    "Baseline": "engine",
    "DriftEngine": "engine",
    "Transitions": "engine",
    "PoolTally": "evaluate",
    "pool_majorities": "evaluate",
}

__all__ = [
    "KINDS",
    "SEVERITIES",
    "Baseline",
    "DriftEngine",
    "DriftFinding",
    "Observation",
    "PoolTally",
    "Transitions",
    "pool_majorities",
]


def __getattr__(name: str) -> Any:
    """The engine's and the evaluation's names, imported on first use (PEP 562)."""
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
