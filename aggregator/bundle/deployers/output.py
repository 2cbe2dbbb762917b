"""What a deployer hands back, and the repository naming the tools share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.bundle.options import BundleOptions

__all__ = ["Output", "refuse", "repo_name"]

# What the GitOps deployers answer to an option they cannot honour, and why.
AIRGAP_HINT = (
    "mirror the charts into a registry the cluster reaches (plumb mirror list --format hauler), "
    "point the recipe's sources at it with --data, or use --deployer helm or helmfile"
)


def refuse(options: BundleOptions, deployer: str, refusals: dict[str, tuple[str, str]]) -> None:
    """Raise BundleError for the first option set in ``options`` that ``refusals`` names
    (``dynamic``, ``vendor_charts``, ``readiness_hooks`` → (why, hint)): an option a deployer
    cannot honour is refused, never silently dropped."""
    for option, (why, hint) in refusals.items():
        if getattr(options, option):
            flag = "--" + option.replace("_", "-")
            raise BundleError(f"the {deployer} deployer cannot take {flag}: {why}", hint=hint)


@dataclass(frozen=True)
class Output:
    """A deployer's files (path → text), its README section, and its executable paths."""

    files: dict[str, str]
    usage: str
    executables: frozenset[str] = field(default_factory=frozenset)


def repo_name(url: str) -> str:
    """Stable repo name from its URL: ``https://charts.jetstack.io`` → ``charts-jetstack-io``.

    Helmfile and Flux both need a name per repository; deriving it keeps bundles reproducible.
    """
    bare = re.sub(r"^[a-z]+://", "", url.lower())
    return re.sub(r"[^a-z0-9]+", "-", bare).strip("-")[:63].rstrip("-")
