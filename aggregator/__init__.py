"""Plumb aggregator: ingests agents' facts, keeps the live state and its history."""

from importlib.metadata import version

# pyproject.toml holds the one version; this reads what was installed from it.
__version__ = version("plumb")
