"""The error the bundle core raises for bad input: unknown deployer, bad ``--set``, bad recipe."""

from __future__ import annotations

from plumb.aggregator.errors import InvalidInput

__all__ = ["BundleError"]


class BundleError(InvalidInput):
    """A bundle request the core cannot honour; the message names the offending input."""
