"""Plumb's node agent: collects a GPU node's facts and streams them to the aggregator.

Deployed alone in a slim image, so it never imports the aggregator.
"""

from importlib.metadata import version

# pyproject.toml holds the one version; this reads what was installed from it.
__version__ = version("plumb")
