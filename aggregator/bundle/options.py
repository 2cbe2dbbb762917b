"""What a bundle request may vary besides the recipe: deployer, value overrides, placement, repo.

Every option arrives as text (CLI flags and the HTTP body use the same forms) and is parsed
here, so both transports reject the same bad input with the same message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plumb.aggregator.bundle.errors import BundleError

__all__ = ["BundleOptions", "Override", "Toleration"]

DEPLOYERS = ("argocd", "flux", "helm", "helmfile")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OVERRIDE = re.compile(r"^(?P<component>[a-z0-9][a-z0-9.-]*):(?P<path>[^=]+)=(?P<value>.*)$", re.S)
_KEY = re.compile(r"^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Override:
    """``component:path=value``: set one existing value of one component."""

    component: str
    path: tuple[str, ...]
    value: str

    @classmethod
    def parse(cls, text: str) -> Override:
        match = _OVERRIDE.match(text)
        if match is None:
            raise BundleError(
                f"--set {text!r}: expected component:path=value",
                hint="e.g. gpu-operator:driver.version=580.95.05",
            )
        path = tuple(match["path"].split("."))
        if any(not part for part in path):
            raise BundleError(f"--set {text!r}: empty key in path {match['path']!r}")
        return cls(match["component"], path, match["value"])

    def __str__(self) -> str:
        return f"{self.component}:{'.'.join(self.path)}={self.value}"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration, written ``key[=value][:effect]`` (no value means operator Exists)."""

    key: str
    value: str | None = None
    effect: str | None = None

    @classmethod
    def parse(cls, text: str) -> Toleration:
        rest, _, effect = text.partition(":")
        key, eq, value = rest.partition("=")
        if not _KEY.match(key) or (eq and not value) or (effect and effect not in EFFECTS):
            raise BundleError(
                f"toleration {text!r}: expected key[=value][:effect]",
                hint=f"effect is one of {', '.join(EFFECTS)}; e.g. nvidia.com/gpu:NoSchedule",
            )
        return cls(key, value or None, effect or None)

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "operator": "Equal" if self.value is not None else "Exists"}
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        return out


def _selector(pairs: Iterable[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in pairs:
        key, eq, value = text.partition("=")
        if not eq or not _KEY.match(key) or len(value) > 63:
            raise BundleError(f"{what} {text!r}: expected label=value")
        out[key] = value
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class BundleOptions:
    """One bundle request's options; ``repo_url`` is where argocd/flux find the bundle in Git."""

    deployer: str = "helm"
    overrides: tuple[Override, ...] = ()
    system_node_selector: Mapping[str, str] = field(default_factory=dict)
    system_tolerations: tuple[Toleration, ...] = ()
    accelerated_node_selector: Mapping[str, str] = field(default_factory=dict)
    accelerated_tolerations: tuple[Toleration, ...] = ()
    repo_url: str | None = None
    repo_branch: str = "main"

    def __post_init__(self) -> None:
        if self.deployer not in DEPLOYERS:
            raise BundleError(
                f"unknown deployer {self.deployer!r}; known: {', '.join(DEPLOYERS)}",
                hint=f"one of {', '.join(DEPLOYERS)}",
            )

    @classmethod
    def parse(
        cls,
        deployer: str = "helm",
        *,
        set: Iterable[str] = (),
        system_node_selector: Iterable[str] = (),
        system_tolerations: Iterable[str] = (),
        accelerated_node_selector: Iterable[str] = (),
        accelerated_tolerations: Iterable[str] = (),
        repo_url: str | None = None,
        repo_branch: str = "main",
    ) -> BundleOptions:
        """Options from their text forms, as the CLI and the HTTP body give them."""
        return cls(
            deployer=deployer,
            overrides=tuple(Override.parse(s) for s in set),
            system_node_selector=_selector(system_node_selector, "system node selector"),
            system_tolerations=tuple(Toleration.parse(t) for t in system_tolerations),
            accelerated_node_selector=_selector(
                accelerated_node_selector, "accelerated node selector"
            ),
            accelerated_tolerations=tuple(Toleration.parse(t) for t in accelerated_tolerations),
            repo_url=repo_url,
            repo_branch=repo_branch,
        )

    def placement(self, kind: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """(node selector, tolerations) for ``system`` or ``accelerated`` pods."""
        selector = getattr(self, f"{kind}_node_selector")
        tolerations = getattr(self, f"{kind}_tolerations")
        return dict(selector), [t.to_dict() for t in tolerations]
