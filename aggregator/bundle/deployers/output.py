"""What a deployer hands back, and the repository naming the tools share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Output", "repo_name"]


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
