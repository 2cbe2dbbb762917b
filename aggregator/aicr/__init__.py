"""NVIDIA AICR interoperability, both ways.

Out: one node's facts as an AICR Snapshot (`snapshot`). In: AICR's `RecipeCriteria` and
`Snapshot` documents as Plumb criteria (`criteria_from_recipe_criteria`,
`criteria_from_snapshot`, `resolve_snapshot`).
"""

from plumb.aggregator.aicr.criteria import (
    CRITERIA_KINDS,
    SNAPSHOT_API_VERSIONS,
    SnapshotCriteria,
    criteria_from_recipe_criteria,
    criteria_from_snapshot,
    resolve_snapshot,
)
from plumb.aggregator.aicr.snapshot import API_VERSION, snapshot

__all__ = [
    "API_VERSION",
    "CRITERIA_KINDS",
    "SNAPSHOT_API_VERSIONS",
    "SnapshotCriteria",
    "criteria_from_recipe_criteria",
    "criteria_from_snapshot",
    "resolve_snapshot",
    "snapshot",
]
