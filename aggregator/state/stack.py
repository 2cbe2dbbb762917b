"""A node's stack hash: one short name for the versions and inventory it runs.

The stack is what drift's baseline compares (`recipes/drift.yaml`, `baseline.paths`: driver,
CUDA, NCCL, kernel, OS, kubelet, container runtime, GPU names, VBIOS, InfoROM), so "the node's
stack changed" means the same thing to a baseline finding, a validated-stack label and a
rollout gate. Sensor readings, error totals and links are not part of it: a temperature, an
ECC count or a link retraining never makes a validated node unvalidated.

`stack_facts` remembers the last few facts dicts it filtered, as `gpu_views` does: one
evaluation asks it for the same dict twice (the hash here, then drift's baseline comparison),
and facts dicts are replaced, never edited in place.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Collection, Mapping
from functools import lru_cache

from plumb.facts import Reading, content_hash

__all__ = ["stack_facts", "stack_hash"]

_INDEX = re.compile(r"\[\d+\]")
_MEMO_SIZE = 8  # a node's facts and its baseline's, and a few pool mates' in one evaluation

_memo: OrderedDict[int, tuple[Mapping[str, Reading], Collection[str], dict[str, Reading]]] = (
    OrderedDict()
)


def stack_hash(facts: Mapping[str, Reading], paths: Collection[str]) -> str:
    """SHA-256 (hex) of the facts whose path, GPU and library indexes as `[]`, is in `paths`;
    the same stack gives the same hash on every node and every replica."""
    return content_hash(stack_facts(facts, paths))


def stack_facts(facts: Mapping[str, Reading], paths: Collection[str]) -> dict[str, Reading]:
    """The facts whose path, GPU and library indexes as `[]`, is in `paths` (do not edit)."""
    held = _memo.get(id(facts))
    if held is not None and held[0] is facts and held[1] is paths:
        return held[2]
    wanted = frozenset(paths)
    found = {p: r for p, r in facts.items() if _unindexed(p) in wanted}
    _memo[id(facts)] = (facts, paths, found)
    if len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return found


@lru_cache(maxsize=1 << 16)
def _unindexed(path: str) -> str:
    """`path` with its indexes as `[]`; a fleet has few distinct paths, each done once."""
    return _INDEX.sub("[]", path)
