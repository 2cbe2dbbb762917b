"""Drift: desired (recipe, knowledge, baseline, pool) against observed facts, continuously.

Pure evaluation in `evaluate`, open/close bookkeeping in `engine`; no web or database code.
"""

from plumb.aggregator.drift.engine import Baseline, DriftEngine, Transitions
from plumb.aggregator.drift.evaluate import PoolTally, pool_majorities
from plumb.aggregator.drift.model import KINDS, SEVERITIES, DriftFinding, Observation

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
