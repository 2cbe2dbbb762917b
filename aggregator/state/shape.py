"""A facts dict's shape: what its paths say, worked out once for every node that has them.

The GPU views, the recipe view and the stack's facts each read a node's facts by what the
paths name (`gpus[3].uuid` is GPU 3's `uuid`; `host.kernel` is in the stack), and a node has
a few hundred paths. Nodes of one kind of machine report the same paths in the same order,
so the paths are read once per distinct order (`shape`) and each node's facts then only
look up the paths that matter: a restore of 10,000 nodes parsed each path three times per
node before (bench/README.md, round 40).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from functools import lru_cache

from plumb.aggregator.state.memo import last_few
from plumb.facts import Reading, gpu_count, unindexed

__all__ = ["Shape", "shape"]

_GPU_LEAF = re.compile(r"^gpus\[(\d+)\]\.(.+)$")
_REPEATED = re.compile(r"^([a-z_.]+)\[(\d+)\]\.([a-z_]+)$")

# Distinct path orders remembered: a fleet has a few kinds of machine, each with a few
# versions of its agent; a node whose paths match none costs one parse of its paths.
SIZE = 256


class Shape:
    """The paths of one facts dict, read once: each GPU's paths by leaf, and what a reader
    selects of the rest (`select`, `entries`), kept per selection."""

    __slots__ = ("_entries", "_paths", "_repeated", "_selected", "gpus")

    def __init__(self, paths: tuple[str, ...]):
        self._paths = paths
        count = gpu_count(dict.fromkeys(paths))
        gpus: list[dict[str, str]] = [{} for _ in range(count)]
        repeated: dict[str, tuple[str, int, str]] = {}
        for path in paths:
            match = _GPU_LEAF.match(path)
            if match is not None and int(match.group(1)) < count:
                gpus[int(match.group(1))][match.group(2)] = path
            match = _REPEATED.match(path)
            if match is not None:
                prefix, index, leaf = match.groups()
                repeated[path] = (prefix, int(index), leaf)
        self.gpus = tuple(gpus)
        self._repeated = repeated
        self._selected: dict[frozenset[str], tuple[str, ...]] = {}
        self._entries: dict[frozenset[tuple[str, str]], tuple] = {}

    def select(self, wanted: Collection[str]) -> tuple[str, ...]:
        """The paths whose form with GPU and library indexes as `[]` is in `wanted`, in
        order."""
        key = wanted if isinstance(wanted, frozenset) else frozenset(wanted)
        found = self._selected.get(key)
        if found is None:
            found = self._selected[key] = tuple(p for p in self._paths if unindexed(p) in key)
        return found

    def entries(self, wanted: frozenset[tuple[str, str]]) -> tuple[tuple[str, str, int, str], ...]:
        """(path, prefix, index, leaf) of each repeated entry's leaf (`cuda.runtimes[1].version`)
        whose (prefix, leaf) is in `wanted`, in order."""
        found = self._entries.get(wanted)
        if found is None:
            found = self._entries[wanted] = tuple(
                (path, *parts)
                for path, parts in self._repeated.items()
                if (parts[0], parts[2]) in wanted
            )
        return found


@lru_cache(maxsize=SIZE)
def _shape(paths: tuple[str, ...]) -> Shape:
    return Shape(paths)


@last_few
def shape(facts: Mapping[str, Reading]) -> Shape:
    """The shape of `facts`' paths, shared with every facts dict that has them in order
    (found once per dict: the GPU views, the recipe view and the stack all ask)."""
    return _shape(tuple(facts))
