"""Simulated nodes for the benchmarks: a profile's facts, with each node's own values.

A profile is collected once and its facts shared by every node made from it, as thousands of
collections would cost the simulator more than the aggregator. What is a node's own on a real
machine (hostname, boot id, GPU UUIDs and serials) is made unique per node, so that the
aggregator's caches, memory and pages meet a real fleet's variety, not 10,000 copies of one
machine. Which paths those are is not listed here: they are the ones whose values differ
between two simulated nodes of the profile.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import NamedTuple

from plumb.agent.collect import collect_all, sensors
from plumb.agent.simulate.node import Simulation
from plumb.facts import Reading

__all__ = ["Profile"]

_HEX = "0123456789abcdef"


class Profile(NamedTuple):
    """A profile's facts and sensor readings, and the paths whose values are each node's own."""

    facts: dict[str, Reading]
    readings: list
    own: tuple[str, ...]
    node: str  # the name it was collected as, which its hostname shows

    @classmethod
    def collect(cls, profile: str, workdir: Path) -> Profile:
        """`profile` collected as two nodes: the paths whose values differ are the own ones."""
        node = f"sim-{profile}"
        sources = Simulation(profile, node, workdir / "a").sources()
        facts = collect_all(sources)
        other = collect_all(Simulation(profile, f"{node}-b", workdir / "b").sources())
        own = tuple(sorted(p for p, r in facts.items() if other.get(p) != r))
        return cls(facts, sensors.read(sources), own, node)

    def node_facts(self, name: str) -> dict[str, Reading]:
        """The profile's facts with node `name`'s own values: the profile node's name (its
        hostname) becomes `name`; every other own value keeps its shape (a UUID stays a UUID,
        a serial its digits) with digits and hex letters drawn from a hash of name and path."""
        facts = dict(self.facts)
        for path in self.own:
            r = facts[path]
            if type(r.value) is not str:
                raise SystemExit(f"{path}: a node's own value that is not text ({r.value!r})")
            if r.value == self.node:
                value = name
            else:
                digest = hashlib.sha512(f"{name}/{path}".encode()).digest()
                value = "".join(
                    str(b % 10) if c.isdigit() else _HEX[b % 16] if c in "abcdef" else c
                    for c, b in zip(r.value, itertools.cycle(digest), strict=False)
                )
            facts[path] = Reading(r.status, value, r.error)
        return facts
