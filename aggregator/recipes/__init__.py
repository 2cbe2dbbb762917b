"""Recipes: which GPU stack belongs on a node, from criteria and the node's live facts.

Pure: loads YAML under ``recipes/`` and computes; no web, database, gRPC or asyncio code.
"""

from aggregator.recipes.cache import ResolutionCache
from aggregator.recipes.catalog import Catalog, RecipeError, load_catalog
from aggregator.recipes.criteria import Criteria, CriteriaError, check_criteria, infer_criteria
from aggregator.recipes.knowledge import Finding
from aggregator.recipes.query import select
from aggregator.recipes.resolve import Resolution, resolve
from aggregator.recipes.versions import Expression, ExpressionError, Version, compare, parse_version

__all__ = [
    "Catalog",
    "Criteria",
    "CriteriaError",
    "Expression",
    "ExpressionError",
    "Finding",
    "RecipeError",
    "Resolution",
    "ResolutionCache",
    "Version",
    "check_criteria",
    "compare",
    "infer_criteria",
    "load_catalog",
    "parse_version",
    "resolve",
    "select",
]
