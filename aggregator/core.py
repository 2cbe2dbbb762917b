"""The aggregator's facade: live state, store and writer behind the questions the API asks.

API routes and CLI commands call one method here and render the result.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import make_url

from aggregator.drift import Baseline, DriftEngine, DriftFinding
from aggregator.errors import NotFound, Unavailable
from aggregator.evaluation import Evaluator
from aggregator.ingest import Ingest, utcnow
from aggregator.metrics import build_registry
from aggregator.recipes import Catalog, Criteria, Resolution, ResolutionCache, load_catalog
from aggregator.settings import AggregatorSettings
from aggregator.state import LiveState, NodeState, NodeSummary
from aggregator.store import HistoryEntry, Store, StoreError, Writer
from plumb import facts as wire

log = logging.getLogger(__name__)

__all__ = ["Core", "open_core"]


@dataclass
class Core:
    """Everything one aggregator process holds."""

    settings: AggregatorSettings
    state: LiveState
    store: Store
    writer: Writer
    ingest: Ingest
    registry: CollectorRegistry
    catalog: Catalog
    recipes: ResolutionCache
    evaluator: Evaluator

    def recipe_for_node(self, name: str) -> Resolution:
        """The recipe resolved from the node's live facts."""
        return self.evaluator.resolution(self.node(name))

    def recipe_for_criteria(self, criteria: Criteria) -> Resolution:
        """The recipe for explicit criteria, without node facts; CriteriaError names bad values."""
        return self.recipes.resolve(criteria)

    def open_findings(
        self,
        *,
        node: str | None = None,
        kind: str | None = None,
        severity: str | None = None,
        component: str | None = None,
    ) -> list[DriftFinding]:
        """Drift findings open now, filtered; NotFound for an unknown node."""
        if node is not None:
            self.node(node)
        return [
            f
            for f in self.evaluator.drift.open_findings(node)
            if (kind is None or f.kind == kind)
            and (severity is None or f.severity == severity)
            and (component is None or f.component == component)
        ]

    async def all_findings(
        self, *, since: datetime | None = None, **filters: str | None
    ) -> list[DriftFinding]:
        """Drift findings open or closed, from the store (closed ones live only there)."""
        if filters.get("node") is not None:
            self.node(filters["node"])  # type: ignore[arg-type]
        await self.writer.flush()
        try:
            return await asyncio.to_thread(self.store.findings, since=since, **filters)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="closed findings need the database") from exc

    def accept_baseline(self, name: str) -> Baseline:
        """Accept the node's current stack as its baseline; baseline findings close."""
        self.evaluator.accept_baseline(self.node(name))
        return self.evaluator.drift.baselines[name]

    def nodes(self) -> list[NodeSummary]:
        """Every known node, by name."""
        return [NodeSummary.of(n) for n in self.state.nodes()]

    def node(self, name: str) -> NodeState:
        """The node called `name`; NotFound when no agent ever reported it."""
        node = self.state.get(name)
        if node is None:
            raise NotFound(f"no node named {name!r}", hint="`plumb nodes` lists the known nodes")
        return node

    async def history(
        self, name: str, since: datetime | None = None, limit: int = 100
    ) -> list[HistoryEntry]:
        """The node's fact changes, newest first."""
        self.node(name)
        try:
            return await asyncio.to_thread(self.store.history, name, since, limit)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="history needs the database; retry shortly") from exc

    def snapshot(self) -> dict:
        """The whole cluster: every node's summary and nested facts."""
        return {
            "nodes": [
                {**summary_json(NodeSummary.of(n)), "facts": wire.nest(n.facts)}
                for n in self.state.nodes()
            ]
        }

    async def readiness(self) -> dict[str, bool]:
        """Which dependencies work right now; ready only when all do."""
        try:
            await asyncio.to_thread(self.store.ping)
            database = True
        except StoreError:
            database = False
        return {"database": database, "writer": self.writer.healthy}


def summary_json(s: NodeSummary) -> dict:
    """A NodeSummary as the JSON the API returns."""
    return {
        "name": s.name,
        "connected": s.connected,
        "last_report_at": s.last_report_at.isoformat() if s.last_report_at else None,
        "driver_version": s.driver_version,
        "cuda_driver_version": s.cuda_driver_version,
        "gpu_count": s.gpu_count,
        "gpu_product": s.gpu_product,
        "kernel": s.kernel,
        "os": s.os,
    }


async def open_core(settings: AggregatorSettings) -> Core:
    """Load recipes, open the database (migrating it), load the last known nodes, wire ingest.

    A broken recipe file stops start-up (RecipeError): never serve half a catalog.
    """
    catalog = await asyncio.to_thread(load_catalog, settings.recipes.dir)
    try:
        store = await asyncio.to_thread(Store, settings.db)
        stored = await asyncio.to_thread(store.load)
        open_findings, baselines = await asyncio.to_thread(store.load_drift)
    except StoreError as exc:
        raise Unavailable(str(exc), hint="check --db and that the database is reachable") from exc
    state = LiveState()
    for n in stored:
        node = state.restore(
            n.name,
            n.facts,
            boot_id=n.boot_id,
            agent_version=n.agent_version,
            first_seen_at=n.first_seen_at,
            last_report_at=n.last_report_at,
        )
        node.content_hash = wire.content_hash(node.facts)
    s = settings.store
    writer = Writer(store, queue_max=s.queue_max, batch_max=s.batch_max, linger_s=s.linger_s)
    drift = DriftEngine(catalog.drift, utcnow)
    drift.restore(open_findings, baselines)
    registry, metrics = build_registry(state, writer)
    ingest = Ingest(state, writer, settings.ingest, metrics.ingest)
    recipes = ResolutionCache(catalog)
    evaluator = Evaluator(
        state, recipes, settings.recipes, drift, writer.submit, metrics.drift.count, utcnow
    )
    metrics.drift.watch(evaluator)
    ingest.on_facts = evaluator.node_changed
    for node in state.nodes():
        evaluator.node_changed(node)  # restored findings that still hold keep their timestamps
    log.info("state loaded", extra={"nodes": len(state), "db": _redact(settings.db)})
    return Core(settings, state, store, writer, ingest, registry, catalog, recipes, evaluator)


def _redact(url: str) -> str:
    """A database URL with its password masked, for logs."""
    return make_url(url).render_as_string(hide_password=True)
