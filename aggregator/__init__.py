"""Plumb aggregator: ingests agents' facts, keeps the live state and its history."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__`, read from the installed metadata (pyproject.toml holds the one version)
    on first use: every `plumb` command imports this package, few need its version."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import version

    value = globals()["__version__"] = version("plumb")
    return value
