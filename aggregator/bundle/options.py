"""What a bundle request may vary besides the recipe: deployer, value overrides, placement, repo.

Every option arrives as text (CLI flags and the HTTP body use the same forms) and is parsed
here, so both transports reject the same bad input with the same message. ``--set-file`` is
the one exception: the CLI reads the file and sends its text, so the server never opens a
path a request names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.bundle.oci import CHART_NAME, CHART_VERSION

__all__ = ["BundleOptions", "Dynamic", "Merge", "Override", "Toleration"]

DEPLOYERS = ("argocd", "argocd-helm", "flux", "helm", "helmfile")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OVERRIDE = re.compile(r"^(?P<component>[a-z0-9][a-z0-9.-]*):(?P<path>[^=]+)=(?P<value>.*)$", re.S)
# A StorageClass name is a DNS-1123 subdomain.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
# A --dynamic path becomes an environment variable name and sits inside a quoted shell word,
# so its keys are restricted to what Helm values keys almost always are.
_DYNAMIC = re.compile(
    r"^(?P<component>[a-z0-9][a-z0-9.-]*):(?P<path>[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)$"
)
_KEY = re.compile(r"^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Override:
    """``component:path=value``: set one existing value of one component."""

    component: str
    path: tuple[str, ...]
    value: str

    @classmethod
    def parse(cls, text: str) -> Override:
        component, path, value = _split("--set", text, "gpu-operator:driver.version=580.95.05")
        return cls(component, path, value)

    def __str__(self) -> str:
        return f"{self.component}:{'.'.join(self.path)}={self.value}"


@dataclass(frozen=True)
class Merge:
    """``--set-json component:path=JSON`` or ``--set-file component:path=FILE``, as Helm has them.

    The value (the parsed JSON, or the file's text) is merged at ``path``: a map deep-merges
    into the map there, anything else (a list, a scalar, text) replaces what is there.
    """

    flag: Literal["--set-json", "--set-file"]
    component: str
    path: tuple[str, ...]
    value: Any

    @classmethod
    def from_json(cls, text: str) -> Merge:
        """``component:path=JSON`` from ``--set-json``."""
        example = 'gpu-operator:daemonsets.labels={"team":"ml"}'
        component, path, raw = _split("--set-json", text, example)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BundleError(
                f"--set-json {text!r}: the value is not JSON: {exc.msg} at column {exc.colno}",
                hint=f"e.g. {example}",
            ) from exc
        except RecursionError as exc:
            raise BundleError(f"--set-json {text!r}: the value nests too deeply") from exc
        return cls("--set-json", component, path, value)

    @classmethod
    def from_file(cls, target: str, content: str) -> Merge:
        """``component:path`` from ``--set-file`` and the text of the file it names."""
        component, path, _ = _split("--set-file", f"{target}=", "gpu-operator:driver.config=FILE")
        return cls("--set-file", component, path, content)

    def __str__(self) -> str:
        where = f"{self.component}:{'.'.join(self.path)}"
        if self.flag == "--set-file":
            return f"{where}=<file, {len(self.value.encode())} bytes>"
        return f"{where}={json.dumps(self.value, sort_keys=True, separators=(',', ':'))}"


@dataclass(frozen=True)
class Dynamic:
    """``--dynamic component:path``: the value at ``path`` is given at install time, not here."""

    component: str
    path: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Dynamic:
        match = _DYNAMIC.match(text)
        if match is None:
            raise BundleError(
                f"--dynamic {text!r}: expected component:path, keys of letters, digits, '_' "
                "and '-' separated by '.'",
                hint="e.g. gpu-operator:driver.version",
            )
        return cls(match["component"], tuple(match["path"].split(".")))

    @property
    def flag(self) -> str:
        return "--dynamic"

    def __str__(self) -> str:
        return f"{self.component}:{'.'.join(self.path)}"


def _split(flag: str, text: str, example: str) -> tuple[str, tuple[str, ...], str]:
    """(component, path, value) of ``component:path=value``; BundleError says what is wrong."""
    match = _OVERRIDE.match(text)
    if match is None:
        raise BundleError(f"{flag} {text!r}: expected component:path=value", hint=f"e.g. {example}")
    path = tuple(match["path"].split("."))
    if any(not part for part in path):
        raise BundleError(f"{flag} {text!r}: empty key in path {match['path']!r}")
    return match["component"], path, match["value"]


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
    """One bundle request's options; ``repo_url`` is where argocd/flux find the bundle in Git.

    ``nodes`` (the expected GPU node count, 0 for unset) and ``storage_class`` go to the value
    paths the registry declares for them, as node placement does. ``chart`` (name, version)
    makes the bundle a Helm chart of that name, for ``oci://`` output (see oci.py).
    ``dynamic`` values are left out of the bundle and read at install time; ``vendor_charts``
    makes the deployers install each upstream chart from its ``.tgz`` inside the bundle (see
    vendor.py); ``readiness_hooks`` makes them wait for each release's workloads before the
    next. Each is refused, saying why, by a deployer that cannot honour it.
    """

    deployer: str = "helm"
    overrides: tuple[Override, ...] = ()
    json_merges: tuple[Merge, ...] = ()
    file_merges: tuple[Merge, ...] = ()
    nodes: int = 0
    storage_class: str | None = None
    dynamic: tuple[Dynamic, ...] = ()
    vendor_charts: bool = False
    readiness_hooks: bool = False
    chart: tuple[str, str] | None = None
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
        if self.nodes < 0:
            raise BundleError(f"nodes must be 0 (unset) or more, got {self.nodes}")
        if self.storage_class is not None and (
            len(self.storage_class) > 253 or not _SUBDOMAIN.match(self.storage_class)
        ):
            raise BundleError(
                f"storage class {self.storage_class!r} is not a StorageClass name",
                hint="lower-case letters, digits, '-' and '.', at most 253 characters; e.g. gp3",
            )
        if self.chart is not None:
            name, version = self.chart
            if not CHART_NAME.match(name) or not CHART_VERSION.match(version):
                raise BundleError(
                    f"chart {name!r} version {version!r}: expected a Helm chart name and a "
                    "SemVer version",
                    hint="e.g. gpu-stack 1.0.0",
                )

    @classmethod
    def parse(
        cls,
        deployer: str = "helm",
        *,
        set: Iterable[str] = (),
        set_json: Iterable[str] = (),
        set_file: Mapping[str, str] | None = None,
        nodes: int = 0,
        storage_class: str | None = None,
        dynamic: Iterable[str] = (),
        vendor_charts: bool = False,
        readiness_hooks: bool = False,
        chart: tuple[str, str] | None = None,
        system_node_selector: Iterable[str] = (),
        system_tolerations: Iterable[str] = (),
        accelerated_node_selector: Iterable[str] = (),
        accelerated_tolerations: Iterable[str] = (),
        repo_url: str | None = None,
        repo_branch: str = "main",
    ) -> BundleOptions:
        """Options from their text forms, as the CLI and the HTTP body give them.

        ``set_file`` maps each ``component:path`` to the text of its file.
        """
        return cls(
            deployer=deployer,
            overrides=tuple(Override.parse(s) for s in set),
            json_merges=tuple(Merge.from_json(s) for s in set_json),
            file_merges=tuple(Merge.from_file(t, c) for t, c in (set_file or {}).items()),
            nodes=nodes,
            storage_class=storage_class,
            dynamic=tuple(Dynamic.parse(d) for d in dynamic),
            vendor_charts=vendor_charts,
            readiness_hooks=readiness_hooks,
            chart=chart,
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
