"""Recipes: which GPU stack belongs on a node, from criteria and the node's live facts.

Pure: loads YAML under ``recipes/`` and computes; no web, database, gRPC or asyncio code.
"""

from plumb.aggregator.recipes.cache import ResolutionCache
from plumb.aggregator.recipes.catalog import Catalog, RecipeError, load_catalog
from plumb.aggregator.recipes.criteria import (
    Criteria,
    CriteriaError,
    check_criteria,
    infer_criteria,
)
from plumb.aggregator.recipes.knowledge import Finding
from plumb.aggregator.recipes.listing import OverlayHealth, list_overlays
from plumb.aggregator.recipes.query import select
from plumb.aggregator.recipes.resolve import Resolution, resolve
from plumb.aggregator.recipes.versions import (
    Expression,
    ExpressionError,
    Version,
    compare,
    parse_version,
)

__all__ = [
    "Catalog",
    "Criteria",
    "CriteriaError",
    "Expression",
    "ExpressionError",
    "Finding",
    "OverlayHealth",
    "RecipeError",
    "Resolution",
    "ResolutionCache",
    "Version",
    "check_criteria",
    "compare",
    "infer_criteria",
    "list_overlays",
    "load_catalog",
    "parse_version",
    "resolve",
    "select",
]
