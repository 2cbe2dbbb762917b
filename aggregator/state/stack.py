"""A node's stack hash: one short name for the versions and inventory it runs.

The stack is what drift's baseline compares (`recipes/drift.yaml`, `baseline.paths`: driver,
CUDA, NCCL, kernel, OS, kubelet, container runtime, GPU names, VBIOS, InfoROM), so "the node's
stack changed" means the same thing to a baseline finding, a validated-stack label and a
rollout gate. Sensor readings, error totals and links are not part of it: a temperature, an
ECC count or a link retraining never makes a validated node unvalidated.

`stack_facts` remembers the last few facts dicts it filtered (state/memo.py): one evaluation
asks it for the same dict twice (the hash here, then drift's baseline comparison); the hash
is remembered for the readings hashed, which nodes of one kind share.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from plumb.aggregator.state.memo import last_few
from plumb.aggregator.state.shape import shape
from plumb.facts import Reading, content_hash

__all__ = ["stack_facts", "stack_hash"]


# Stack hashes by the paths and the identity of the readings hashed: nodes of one kind share
# their readings (flatten and Store.load keep one object per distinct reading), so a fleet's
# restore or cold start hashes each stack once, not once per node. Each entry holds its
# readings, so no identity in a key is reused while it is kept.
_HASHES_MAX = 1 << 10
_hashes: dict[tuple[tuple[str, ...], tuple[int, ...]], tuple[tuple[Reading, ...], str]] = {}


def stack_hash(facts: Mapping[str, Reading], paths: Collection[str]) -> str:
    """SHA-256 (hex) of the facts whose path, GPU and library indexes as `[]`, is in `paths`;
    the same stack gives the same hash on every node and every replica."""
    stack = stack_facts(facts, paths)
    readings = tuple(stack.values())
    key = (tuple(stack), tuple(map(id, readings)))
    found = _hashes.get(key)
    if found is None:
        if len(_hashes) >= _HASHES_MAX:
            _hashes.clear()
        found = _hashes[key] = (readings, content_hash(stack))
    return found[1]


@last_few
def stack_facts(facts: Mapping[str, Reading], paths: Collection[str]) -> dict[str, Reading]:
    """The facts whose path, GPU and library indexes as `[]`, is in `paths` (do not edit)."""
    return {p: facts[p] for p in shape(facts).select(paths)}
