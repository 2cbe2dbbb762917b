"""Keeps every node's recipe and drift findings current as its facts change.

On each change of a node's facts: re-resolve its recipe (cached by inputs, so a pool of
identical nodes costs one resolution), evaluate its drift, and re-evaluate the pool
findings of every node that shares its old or new pool, since a majority may have moved.
Transitions go to the store through `submit` and are counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from plumb.aggregator.drift import DriftEngine, PoolTally, Transitions
from plumb.aggregator.recipes import Resolution, ResolutionCache, infer_criteria
from plumb.aggregator.settings import RecipeSettings
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.store import NodeUpdate

log = logging.getLogger(__name__)

__all__ = ["Evaluator", "pool_name"]


def pool_name(resolution: Resolution) -> str:
    """A pool is the nodes with the same resolved criteria: `eks/h100/ubuntu/any/any`."""
    c = resolution.criteria
    return "/".join((c.service, c.accelerator, c.os, c.intent, c.platform))


class Evaluator:
    """Recipes, pools and drift of every node in `state`."""

    def __init__(
        self,
        state: LiveState,
        recipes: ResolutionCache,
        settings: RecipeSettings,
        drift: DriftEngine,
        submit: Callable[[NodeUpdate], object],
        on_transitions: Callable[[Transitions], None],
        clock: Callable[[], datetime],
    ):
        self._state = state
        self._recipes = recipes
        self._settings = settings
        self.drift = drift
        self._submit = submit
        self._on_transitions = on_transitions
        self._clock = clock
        self.resolutions: dict[str, Resolution] = {}
        self.pools: dict[str, set[str]] = {}
        self._pool_of: dict[str, str] = {}
        self._tallies: dict[str, PoolTally] = {}
        self._majorities: dict[str, dict[str, str]] = {}

    def resolution(self, node: NodeState) -> Resolution:
        """The node's recipe, resolving it first if it never was."""
        if node.name not in self.resolutions:
            self.node_changed(node)
        return self.resolutions[node.name]

    def node_changed(self, node: NodeState) -> None:
        """Re-resolve and re-evaluate `node`, then the pool findings of its pool mates."""
        criteria = infer_criteria(
            node.facts,
            intent=self._settings.intent,
            platform=self._settings.platform,
            catalog=self._recipes.catalog,
        )
        resolution = self._recipes.resolve(criteria, node.facts)
        self.resolutions[node.name] = resolution
        old_pool, new_pool = self._pool_of.get(node.name), pool_name(resolution)
        if old_pool is not None and old_pool != new_pool:
            self.pools[old_pool].discard(node.name)
            self._tallies[old_pool].discard(node.name)
        self.pools.setdefault(new_pool, set()).add(node.name)
        self._pool_of[node.name] = new_pool
        tally = self._tallies.setdefault(new_pool, PoolTally(self.drift.rules.pool))
        tally.add(node.name, node.facts)
        majorities = tally.majorities()
        self._emit(self.drift.evaluate(node.name, node.facts, resolution, majorities))
        for pool in {old_pool, new_pool} - {None}:
            self._refresh_pool(pool, skip=node.name)  # type: ignore[arg-type]

    def accept_baseline(self, node: NodeState) -> None:
        """Make the node's current stack its baseline, and close what that settles."""
        baseline = self.drift.accept_baseline(node.name, node.facts)
        self._submit(NodeUpdate(node=node.name, at=self._clock(), baseline=baseline))
        self.node_changed(node)

    def pool_driver_versions(self) -> dict[str, int]:
        """Distinct driver versions among the nodes of each pool."""
        out = {}
        for pool, names in self.pools.items():
            versions = {
                n.value("driver.driver_version")
                for name in names
                if (n := self._state.get(name)) is not None
            }
            out[pool] = len(versions - {None})
        return out

    def _refresh_pool(self, pool: str, skip: str) -> None:
        """Re-evaluate the pool findings of every member, but only if the majority moved."""
        majorities = self._tallies[pool].majorities()
        if majorities == self._majorities.get(pool):
            return
        self._majorities[pool] = majorities
        for name in sorted(self.pools.get(pool, ())):
            member = self._state.get(name)
            if name == skip or member is None or name not in self.resolutions:
                continue
            recipe_hash = self.resolutions[name].content_hash
            self._emit(self.drift.evaluate_pool(name, member.facts, recipe_hash, majorities))

    def _emit(self, transitions: Transitions) -> None:
        if not transitions:
            return
        self._submit(
            NodeUpdate(
                node=transitions.node,
                at=self._clock(),
                opened=transitions.opened,
                closed=transitions.closed,
                baseline=transitions.baseline,
            )
        )
        self._on_transitions(transitions)
        for f in transitions.opened:
            log.info(
                "drift opened",
                extra={
                    "node": f.node,
                    "kind": f.kind,
                    "component": f.component,
                    "severity": f.severity,
                    "observed": f.observed,
                },
            )
        for f in transitions.closed:
            log.info(
                "drift closed", extra={"node": f.node, "kind": f.kind, "component": f.component}
            )
