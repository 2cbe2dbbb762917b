"""The aggregator's facade: live state, store and writer behind the questions the API asks.

API routes and CLI commands call one method here and render the result.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy.engine import make_url

from plumb import facts as wire
from plumb.aggregator import __version__, aicr
from plumb.aggregator.bundle import Bundle, BundleOptions, Recipe, build, parse_recipe
from plumb.aggregator.drift import SEVERITIES, Baseline, DriftEngine, DriftFinding
from plumb.aggregator.drift.evaluation import Evaluator, pool_name
from plumb.aggregator.errors import InvalidInput, NotFound, Unavailable
from plumb.aggregator.ingest.auth import build_authenticator
from plumb.aggregator.ingest.servicer import Ingest, utcnow
from plumb.aggregator.intake.replicas import Replicas
from plumb.aggregator.k8s import Cluster, api_client, in_cluster, node_marks
from plumb.aggregator.metrics.collectors import Metrics, build_registry, exposition
from plumb.aggregator.recipes import Catalog, Criteria, Resolution, ResolutionCache, load_catalog
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.state.live import LiveState, NodeState, NodeSummary
from plumb.aggregator.store import HistoryEntry, Store, StoreError, Writer
from plumb.aggregator.validation import ValidationRun, Validator
from plumb.aggregator.validation.kubernetes import Kube

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
    validator: Validator
    replicas: Replicas
    metrics: Metrics | None = None
    # False from start-up until `restore` has hashed and evaluated the stored nodes.
    restored: bool = True

    # The Kubernetes side; None outside a cluster without a kubeconfig (the demo).
    cluster: Cluster | None = None

    def metrics_page(self) -> bytes:
        """The /metrics page: registry families and the cached per-node series."""
        if self.metrics is None:
            return generate_latest(self.registry)
        return exposition(self.registry, self.metrics)

    def recipe_for_node(self, name: str) -> Resolution:
        """The recipe resolved from the node's live facts."""
        return self.evaluator.resolution(self.node(name))

    def recipe_for_criteria(self, criteria: Criteria) -> Resolution:
        """The recipe for explicit criteria, without node facts; CriteriaError names bad values."""
        return self.recipes.resolve(criteria)

    async def bundle(
        self,
        options: BundleOptions,
        *,
        node: str | None = None,
        criteria: Criteria | None = None,
        recipe: Mapping | str | None = None,
    ) -> Bundle:
        """A bundle of the recipe for exactly one of `node` (with its facts as evidence),
        `criteria`, or an uploaded `recipe`; InvalidInput when the sources don't say which."""
        if sum(x is not None for x in (node, criteria, recipe)) != 1:
            raise InvalidInput("give exactly one of criteria, node or recipe")
        facts = None
        if node is not None:
            source = Recipe.of(self.recipe_for_node(node))
            facts = self.node(node).facts
        elif criteria is not None:
            source = Recipe.of(self.recipe_for_criteria(criteria))
        else:
            source = await asyncio.to_thread(parse_recipe, recipe, self.catalog)  # type: ignore[arg-type]
        return await asyncio.to_thread(build, source, self.catalog, options, facts=facts, node=node)

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

    def overview(self, node: NodeState) -> dict:
        """What lists show beside a node's summary: its pool, NCCL, CUDA runtime, findings.

        `pool` is the node's resolved criteria (`service/accelerator/os/intent/platform`);
        `findings` counts open drift findings by severity; `drifted` is true while any is open.
        """
        resolution = self.evaluator.resolutions.get(node.name)
        counts = dict.fromkeys(SEVERITIES, 0)
        for f in self.evaluator.drift.open_findings(node.name):
            counts[f.severity] += 1
        return {
            "pool": pool_name(resolution) if resolution is not None else None,
            "nccl_version": node.derived("nccl_version", _nccl_version),
            "cuda_runtime_version": node.derived("cuda_runtime_version", _cuda_runtime_version),
            "findings": counts,
            "drifted": any(counts.values()),
        }

    def node_rows(self, *, pool: str | None = None, drifted: bool | None = None) -> list[dict]:
        """Every node's summary and overview as JSON, optionally only one pool or drift state."""
        rows = []
        for n in self.state.nodes():
            row = {**summary_json(NodeSummary.of(n)), **self.overview(n)}
            if pool is not None and row["pool"] != pool:
                continue
            if drifted is not None and row["drifted"] != drifted:
                continue
            rows.append(row)
        return rows

    async def aicr_snapshots(self, node: str | None = None) -> Iterator[dict]:
        """AICR Snapshot documents: one for `node`, else one per known node, by name.

        Like `snapshot`: captured here, each document built only as the caller iterates.
        """
        nodes = [self.node(node)] if node is not None else list(self.state.nodes())
        rows = [(n.name, n.facts, self.evaluator.resolutions.get(n.name)) for n in nodes]
        at, count = utcnow(), len(self.state)
        return (
            aicr.snapshot(
                name,
                facts,
                at=at,
                version=f"plumb-{__version__}",
                service=r.criteria.service if r else "any",
                accelerator=r.criteria.accelerator if r else "any",
                node_count=count,
            )
            for name, facts, r in rows
        )

    def start_validation(
        self,
        *,
        phases: tuple[str, ...] = (),
        nodes: tuple[str, ...] = (),
        checks: tuple[str, ...] = (),
        deadline_s: float | None = None,
    ) -> ValidationRun:
        """Start a validation run in the background; InvalidInput / NotFound say what is wrong."""
        return self.validator.start(
            phases=phases, nodes=nodes, checks=checks, deadline_s=deadline_s
        )

    async def validation(self, run_id: str) -> ValidationRun:
        """A validation run, running or finished (from memory, else from the store)."""
        run = self.validator.get(run_id)
        if run is not None:
            return run
        try:
            run = await asyncio.to_thread(self.store.validation, run_id)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="older runs are read from the database") from exc
        if run is None:
            raise NotFound(f"no validation run {run_id!r}", hint="GET /v1/validations lists them")
        return run

    async def validations(self, limit: int = 20) -> list[ValidationRun]:
        """Recent validation runs, newest first: those in memory (running or just finished),
        then the stored ones, which include runs from before a restart."""
        held = self.validator.recent()
        try:
            stored = await asyncio.to_thread(self.store.validations, limit)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="older runs are read from the database") from exc
        ids = {r.id for r in held}
        runs = held + [r for r in stored if r.id not in ids]
        return sorted(runs, key=lambda r: r.created_at, reverse=True)[:limit]

    async def snapshot(self, chunk: int = 500) -> Iterator[dict]:
        """The whole cluster: every node's summary and nested facts, by name.

        Summaries are captured here, `chunk` nodes per turn of the loop; each node's facts are
        nested only as the caller iterates, so it can render node by node in a thread
        without holding 10,000 nested trees at once. Facts dicts are replaced, never edited
        in place, so what was captured stays consistent.
        """
        rows = []
        for i, n in enumerate(self.state.nodes(), 1):
            rows.append((summary_json(NodeSummary.of(n)), n.facts))
            if i % chunk == 0:
                await asyncio.sleep(0)
        return ({**row, "facts": wire.nest(facts)} for row, facts in rows)

    async def restore(self, chunk: int = 100) -> None:
        """Hash and evaluate the nodes loaded from the store, `chunk` at a time.

        Runs after the gRPC port opens, yielding to the loop between chunks, so agents
        reconnect while it works; until it ends, some restored nodes lack their recipe and
        pool (and, stored before migration 0004, their content hash), and /readyz says
        `restored: false`.
        """
        pending = [n for n in self.state.nodes() if n.facts]
        try:
            for i, node in enumerate(pending, 1):
                node.ensure_hash()
                self.evaluator.node_changed(node)  # findings that still hold keep their times
                if i % chunk == 0:
                    await asyncio.sleep(0)
        except Exception:
            log.exception("restoring stored nodes failed; /readyz stays 503 until a restart")
            raise
        self.restored = True
        # The restored fleet is long-lived: keep it out of the collector's full passes, which at
        # 10,000 nodes held the GIL, and so the loop, for ~0.5 s whenever a render triggered one.
        gc.freeze()
        log.info("state restored", extra={"nodes": len(pending)})

    def replica(self) -> dict:
        """This replica's part in the cluster: whether it watches Kubernetes and leads."""
        if self.cluster is None:
            return {"kubernetes": False, "leader": None, "identity": None}
        return {
            "kubernetes": True,
            "leader": self.cluster.is_leader(),
            "identity": self.cluster.identity,
        }

    async def readiness(self) -> dict[str, bool]:
        """Which dependencies work right now, and whether restored nodes are evaluated yet;
        ready only when all are true."""
        try:
            await asyncio.to_thread(self.store.ping)
            database = True
        except StoreError:
            database = False
        return {
            "database": database,
            "writer": self.writer.healthy,
            "restored": self.restored,
        }


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


def _nccl_version(node: NodeState) -> str | None:
    return _distinct(node, "nccl.libraries", "version")


def _cuda_runtime_version(node: NodeState) -> str | None:
    return _distinct(node, "cuda.runtimes", "version")


def _distinct(node: NodeState, prefix: str, leaf: str) -> str | None:
    """The distinct ok values of `prefix[i].leaf`, sorted and joined by ", "."""
    found = sorted(
        {
            str(r.value)
            for p, r in node.facts.items()
            if p.startswith(prefix + "[") and p.endswith("]." + leaf) and r.status == "ok"
        }
    )
    return ", ".join(found) or None


async def open_core(settings: AggregatorSettings) -> Core:
    """Load recipes, open the database (migrating it), load the last known nodes, wire ingest.

    The loaded nodes are neither hashed nor evaluated here: `Core.restore` does that once
    the caller has opened the ports. A broken recipe file stops start-up (RecipeError):
    never serve half a catalog.
    """
    catalog = await asyncio.to_thread(load_catalog, settings.recipes.dir)
    try:
        store = await asyncio.to_thread(Store, settings.db, replica=settings.replica.name)
        stored = await asyncio.to_thread(store.load)
        open_findings, baselines = await asyncio.to_thread(store.load_drift)
        await asyncio.to_thread(
            store.finish_interrupted_validations, utcnow(), settings.replica.alive_s
        )
    except StoreError as exc:
        raise Unavailable(str(exc), hint="check --db and that the database is reachable") from exc
    state = LiveState()
    for n in stored:
        state.restore(
            n.name,
            n.facts,
            boot_id=n.boot_id,
            agent_version=n.agent_version,
            first_seen_at=n.first_seen_at,
            last_report_at=n.last_report_at,
            content_hash=n.content_hash or "",
            owner=n.owner,
        )
    s = settings.store
    writer = Writer(store, queue_max=s.queue_max, batch_max=s.batch_max, linger_s=s.linger_s)
    drift = DriftEngine(catalog.drift, utcnow)
    drift.restore(open_findings, baselines)
    registry, metrics = build_registry(state, writer)
    # SQLite is one process; on PostgreSQL other replicas may write the same database.
    shared = make_url(settings.db).get_backend_name() == "postgresql"
    ingest = Ingest(
        state,
        writer,
        settings.ingest,
        metrics.ingest,
        build_authenticator(settings.auth),
        replica=settings.replica.name,
        write_heartbeats=shared,
    )
    recipes = ResolutionCache(catalog)
    evaluator = Evaluator(
        state, recipes, settings.recipes, drift, writer.submit, metrics.drift.count, utcnow
    )
    metrics.drift.watch(evaluator)
    metrics.nodes.watch(evaluator)
    replicas = Replicas(
        settings.replica,
        tailing=shared,
        idle_timeout_s=settings.ingest.idle_timeout_s,
        store=store,
        state=state,
        evaluator=evaluator,
        clock=utcnow,
        loaded=stored,
    )
    metrics.nodes.exports = metrics.drift.exports = replicas.exports
    metrics.drift.exports_cluster = replicas.exports_cluster
    ingest.on_facts = evaluator.node_changed
    log.info("state loaded", extra={"nodes": len(state), "db": _redact(settings.db)})
    api = _kube_api(settings)
    cluster = None
    if api is not None and settings.kubernetes.mode == "auto":
        cluster = Cluster(
            api,
            settings,
            catalog,
            ingest.set_cluster_facts,
            lambda: node_marks(state, evaluator, settings.kubernetes.agent_stale_s, utcnow()),
            lambda loop: metrics.cluster.errors.labels(loop=loop).inc(),
        )
        metrics.cluster.watch(cluster.is_leader)
    kube = None
    if api is not None and settings.validation.kubernetes == "auto":
        leader = cluster.is_leader if cluster is not None else _always
        kube = Kube(api, settings.validation.namespace, leader=leader)
    validator = _validator(settings, catalog, state, evaluator, ingest, store, kube)
    metrics.validation.watch(validator)
    return Core(
        settings,
        state,
        store,
        writer,
        ingest,
        registry,
        catalog,
        recipes,
        evaluator,
        validator,
        replicas,
        metrics,
        restored=not stored,
        cluster=cluster,
    )


def _validator(
    settings: AggregatorSettings,
    catalog: Catalog,
    state: LiveState,
    evaluator: Evaluator,
    ingest: Ingest,
    store: Store,
    kube: Kube | None,
) -> Validator:
    """Validation wired to the agents' streams (out and back) and to the store."""

    def baseline_gpus(node: str) -> int | None:
        base = evaluator.drift.baselines.get(node)
        return base.gpu_count if base is not None else None

    async def save(run: ValidationRun) -> None:
        await asyncio.to_thread(store.save_validation, run)

    v = settings.validation
    validator = Validator(
        catalog,
        state,
        evaluator.resolution,
        baseline_gpus,
        ingest.send,
        save,
        utcnow,
        max_parallel_nodes=v.max_parallel_nodes,
        grace_s=v.grace_s,
        default_deadline_s=v.default_deadline_s,
        keep_runs=v.keep_runs,
        kube=kube,
    )
    ingest.on_check_result = validator.check_result
    ingest.on_stream_closed = validator.stream_closed
    return validator


def _kube_api(settings: AggregatorSettings) -> ApiClient | None:
    """The process's Kubernetes client: auth.kubeconfig, else in cluster; None where neither,
    or where it cannot be configured (logged: the Kubernetes side and checks are off)."""
    kubeconfig = settings.auth.kubeconfig
    if kubeconfig is None and not in_cluster():
        return None  # not in a cluster and no kubeconfig: the demo, a lab
    try:
        return api_client(kubeconfig)
    except Unavailable as exc:
        log.warning("Kubernetes side disabled", extra={"error": str(exc), "hint": exc.hint})
        return None


def _always() -> bool:
    return True


def _redact(url: str) -> str:
    """A database URL with its password masked, for logs."""
    return make_url(url).render_as_string(hide_password=True)
