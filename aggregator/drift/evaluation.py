"""Keeps every node's recipe and drift findings current as its facts change.

On each change of a node's facts: re-resolve its recipe (cached by inputs, so a pool of
identical nodes costs one resolution), evaluate its drift, and re-evaluate the pool
findings of every node that shares its old or new pool, since a majority may have moved.
The evaluator decides and returns the transitions; the intake stores them with the change
that caused them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from plumb.aggregator.drift import DriftEngine, PoolTally, Transitions
from plumb.aggregator.recipes import Resolution, ResolutionCache, infer_criteria
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.settings import RecipeSettings
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.facts import Reading

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
    ):
        self._state = state
        self._recipes = recipes
        self._settings = settings
        self.drift = drift
        self.resolutions: dict[str, Resolution] = {}
        self.pools: dict[str, set[str]] = {}
        self._pool_of: dict[str, str] = {}
        self._tallies: dict[str, PoolTally] = {}
        self._majorities: dict[str, dict[str, str]] = {}
        # Per pool, how many members run each driver version, kept as nodes change: a
        # scrape reads it without walking the fleet.
        self._drivers: dict[str, Counter[str]] = {}
        self._driver_of: dict[str, tuple[str, str]] = {}

    def resolution(self, node: NodeState) -> Resolution:
        """The node's recipe: the one evaluated last, else resolved now (not evaluated: a
        restored node before its turn)."""
        held = self.resolutions.get(node.name)
        return held if held is not None else self._resolve(node)

    def node_changed(self, node: NodeState) -> list[Transitions]:
        """Re-resolve and re-evaluate `node`, then the pool findings of its pool mates; what
        changed, the node's own transitions first."""
        resolution = self._resolve(node)
        self.resolutions[node.name] = resolution
        old_pool, new_pool = self._pool_of.get(node.name), pool_name(resolution)
        if old_pool is not None and old_pool != new_pool:
            self.pools[old_pool].discard(node.name)
            self._tallies[old_pool].discard(node.name)
        self.pools.setdefault(new_pool, set()).add(node.name)
        self._pool_of[node.name] = new_pool
        self._count_driver(node.name, new_pool, node.value("driver.driver_version"))
        tally = self._tallies.get(new_pool)
        if tally is None:  # not setdefault: a tally's counters cost ~0.1 ms to build
            tally = self._tallies[new_pool] = PoolTally(self.drift.rules.pool)
        tally.add(node.name, node.facts)
        majorities = tally.majorities()
        out = [self.drift.evaluate(node.name, node.facts, resolution, majorities)]
        for pool in sorted({old_pool, new_pool} - {None}):  # type: ignore[type-var]
            out.extend(self._refresh_pool(pool, skip=node.name))
        return [t for t in out if t]

    def forget(self, name: str) -> list[Transitions]:
        """Drop a removed node's recipe and pool place, and close its findings; its pool
        mates' pool findings change if the majority moved without it. The node's own
        transitions first."""
        self.resolutions.pop(name, None)
        self._count_driver(name, None, None)
        out = [self.drift.forget(name)]
        pool = self._pool_of.pop(name, None)
        if pool is not None:
            self.pools[pool].discard(name)
            self._tallies[pool].discard(name)
            out.extend(self._refresh_pool(pool, skip=name))
        return [t for t in out if t]

    def pool_of(self, name: str) -> str | None:
        """The pool node `name` was last evaluated in; None before its first evaluation."""
        return self._pool_of.get(name)

    def pool_driver_versions(self) -> dict[str, int]:
        """Distinct driver versions among the nodes of each pool."""
        return {pool: len(self._drivers.get(pool, ())) for pool in self.pools}

    def _count_driver(self, name: str, pool: str | None, version: str | None) -> None:
        """Count node `name` as running `version` in `pool` (neither: not at all)."""
        held = self._driver_of.pop(name, None)
        if held is not None:
            counts = self._drivers[held[0]]
            counts[held[1]] -= 1
            if not counts[held[1]]:
                del counts[held[1]]
        if pool is not None and version is not None:
            self._driver_of[name] = (pool, version)
            self._drivers.setdefault(pool, Counter())[version] += 1

    def view(self, node: NodeState) -> NodeView:
        """The node's facts as recipes read them, built once per facts version (criteria,
        the resolution's key and the lists' NCCL and CUDA columns all read it)."""
        return node.derived("recipe_view", lambda n: self._view_of(n.facts))

    def _resolve(self, node: NodeState) -> Resolution:
        return self._resolve_view(node.facts, self.view(node))

    def resolve_facts(self, facts: Mapping[str, Reading]) -> Resolution:
        """The recipe of a node with these facts, as drift resolves it (what-if asks it of
        facts with planned versions in place)."""
        return self._resolve_view(facts, self._view_of(facts))

    def _view_of(self, facts: Mapping[str, Reading]) -> NodeView:
        return NodeView.from_facts(facts, self._recipes.catalog.gpu_identity)

    def _resolve_view(self, facts: Mapping[str, Reading], view: NodeView) -> Resolution:
        criteria = infer_criteria(
            facts,
            intent=self._settings.intent,
            platform=self._settings.platform,
            catalog=self._recipes.catalog,
            view=view,
        )
        return self._recipes.resolve(criteria, facts, view=view)

    def _refresh_pool(self, pool: str, skip: str) -> list[Transitions]:
        """Re-evaluate the pool findings of every member, but only if the majority moved."""
        majorities = self._tallies[pool].majorities()
        if majorities == self._majorities.get(pool):
            return []
        self._majorities[pool] = majorities
        out = []
        for name in sorted(self.pools.get(pool, ())):
            member = self._state.get(name)
            if name == skip or member is None or name not in self.resolutions:
                continue
            recipe_hash = self.resolutions[name].content_hash
            out.append(self.drift.evaluate_pool(name, member.facts, recipe_hash, majorities))
        return out
