"""The node's facts, gathered from every source into the flat form of `plumb.facts`.

One module per source (NVML, host files, CUDA, NCCL). `Sources` is the only thing simulation
swaps: the collectors always run for real, against a real or a materialised host root.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from plumb.agent.collect import cuda, host, libraries, nccl, nvml
from plumb.agent.collect.xid import XidLog
from plumb.facts import Reading, flatten, unflatten

__all__ = ["Sources", "collect_all", "real_sources"]


@dataclass(frozen=True)
class Sources:
    """Where facts come from: the only thing simulation swaps."""

    nvml: Any  # the real `pynvml` module or an agent.nvml_fake.FakeNvml: same function names
    host_root: Path  # "/" on a bare host, "/host" in a container, a temp dir in simulation
    # (kind "cudart" | "nccl", absolute path including the root) -> "12.4" / "2.21.5"; raises
    library_version: Callable[[str, Path], str]
    library_dirs: tuple[Path, ...] = ()  # extra dirs (relative to host_root) to search
    node: Mapping[str, Reading] = field(default_factory=dict)  # facts from outside the host
    # Collectors with nothing to read ("host", "cuda", "nccl"): a replayed capture describes
    # no host, so every fact they would give is not_supported rather than read from a void,
    # and their lists (sysctls, units, libraries) are empty.
    without: frozenset[str] = frozenset()
    # What an XidWatcher saw (the agent runs one); None: no XID facts (`--once`, benchmarks).
    xids: XidLog | None = None


def collect_all(sources: Sources) -> dict[str, Reading]:
    """Canonical flat facts: returns plumb.facts.flatten(plumb.facts.unflatten(raw)) so types are
    normalised (the hash depends on it)."""
    raw: dict[str, Reading] = {}
    for name, collector in _COLLECTORS:
        readings = collector(sources)
        if name in sources.without:
            readings = {p: Reading.not_supported() for p in readings if "[" not in p}
        raw.update(readings)
    return _CANONICAL.of(raw)


_COLLECTORS = (
    ("host", host.collect),
    ("nvml", nvml.collect),
    ("cuda", cuda.collect),
    ("nccl", nccl.collect),
)


class _Canonical:
    """flatten(unflatten(raw)), reused while a poll's raw readings equal the last poll's: the
    round trip costs several times the comparison, and most polls find nothing changed."""

    def __init__(self) -> None:
        self._last: tuple[dict[str, Reading], dict[str, Reading]] | None = None

    def of(self, raw: dict[str, Reading]) -> dict[str, Reading]:
        last = self._last  # one read: collections may run on several threads
        if last is None or last[0] != raw:
            last = self._last = (raw, flatten(unflatten(raw)))
        return dict(last[1])  # a copy: callers own what they are given


_CANONICAL = _Canonical()


def real_sources(
    host_root: Path = Path("/"), library_dirs: tuple[Path, ...] = (), xids: XidLog | None = None
) -> Sources:
    """Sources for a real node: the pynvml module and ctypes probes of the host's libraries."""
    return Sources(
        nvml=pynvml,
        host_root=host_root,
        library_version=libraries.probe_version,
        library_dirs=tuple(Path(d) for d in library_dirs),
        xids=xids,
    )
