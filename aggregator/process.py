"""`plumb serve`: the one place that builds the aggregator, then serves gRPC and HTTP.

`open_process` constructs every object with its collaborators as constructor arguments, in
the order the data flows (store, state, evaluator, metrics, intake, replicas, Kubernetes,
validation, ingest, core), so a reader follows a fact by reading it top to bottom; nothing is
assigned or registered afterwards. `serve` runs it on one event loop until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from datetime import timedelta

import uvicorn
from kubernetes.client import ApiClient
from sqlalchemy.engine import make_url

from plumb.aggregator import heap
from plumb.aggregator.api import create_app
from plumb.aggregator.api.models import NodeOut
from plumb.aggregator.core import Core, NodeRows
from plumb.aggregator.drift import DriftEngine
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.errors import InvalidInput, Unavailable
from plumb.aggregator.fleet_baselines import FleetBaselines
from plumb.aggregator.gates import Gates, ValidatedStacks
from plumb.aggregator.ingest.auth import build_authenticator
from plumb.aggregator.ingest.port import Port
from plumb.aggregator.ingest.servicer import Ingest
from plumb.aggregator.ingest.streams import Streams
from plumb.aggregator.intake.intake import Intake
from plumb.aggregator.intake.replicas import Replicas
from plumb.aggregator.k8s import Cluster, Remediator, api_client, in_cluster, node_marks
from plumb.aggregator.metrics.collectors import (
    ClusterErrors,
    DriftMetrics,
    IngestMetrics,
    LeaderCollector,
    LoopLag,
    MetricsPage,
    PrunedRows,
    RemediationActions,
    ScheduleMetrics,
    ValidationMetrics,
    ValidationResults,
    new_registry,
)
from plumb.aggregator.metrics.gates import GateCollector
from plumb.aggregator.metrics.nodes import NodeSeries
from plumb.aggregator.metrics.sensors import SensorSeries
from plumb.aggregator.recipes import ResolutionCache, load_catalog
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.state.live import LiveState, NodeState, utcnow
from plumb.aggregator.state.replicas import Membership
from plumb.aggregator.store import Store, StoreError, Writer
from plumb.aggregator.store.retention import Retention
from plumb.aggregator.validation import CheckResult, ValidationRun, Validator
from plumb.aggregator.validation.kubernetes import Kube, cluster_recipe
from plumb.aggregator.validation.prometheus import Prometheus
from plumb.aggregator.validation.schedule import Scheduler, busiest_gpu

log = logging.getLogger(__name__)

# Streams get this long to finish on shutdown before they are cancelled.
_GRACE_S = 5.0


@dataclass(frozen=True)
class Process:
    """Everything one aggregator process runs; `serve` starts and stops it."""

    settings: AggregatorSettings
    core: Core
    store: Store
    writer: Writer
    streams: Streams
    ingest: Ingest
    intake: Intake
    replicas: Replicas
    retention: Retention
    scheduler: Scheduler
    cluster: Cluster | None
    # Loaded from the store, evaluated by `restore` once the ports are open.
    loaded: list[NodeState]
    restored: asyncio.Event
    loop_lag: LoopLag

    async def expire_nodes(self) -> None:
        """Remove nodes gone longer than nodes.expire_after_s, until cancelled; with replicas,
        only the first live one does (the others learn it from the database)."""
        n = self.settings.nodes
        if n.expire_after_s is None:
            return
        after = timedelta(seconds=n.expire_after_s)
        while True:
            await asyncio.sleep(n.expire_check_s)
            if self.replicas.membership.leader == self.settings.replica.name:
                gone = self.intake.expire(utcnow(), after)
                if gone:
                    log.info(
                        "nodes expired", extra={"nodes": len(gone), "after_s": n.expire_after_s}
                    )

    async def restore(self) -> None:
        """Hash and evaluate the nodes loaded from the store; /readyz says `restored: false`
        until it is done. Until then some restored nodes lack their recipe and pool."""
        try:
            await self.intake.evaluate_restored(self.loaded)
        except Exception:
            log.exception("restoring stored nodes failed; /readyz stays 503 until a restart")
            raise
        self.restored.set()
        heap.freeze_long_lived()  # the restored fleet: out of the collector's full passes
        log.info("state restored", extra={"nodes": len(self.loaded)})


async def open_process(settings: AggregatorSettings) -> Process:
    """Load recipes, open the database (migrating it), load the last known nodes, and build
    everything that serves them.

    The loaded nodes are neither hashed nor evaluated here: `Process.restore` does that once
    the caller has opened the ports. A broken recipe file stops start-up (RecipeError):
    never serve half a catalog.
    """
    catalog = await asyncio.to_thread(load_catalog, settings.recipes.dir, settings.recipes.data)
    try:
        store = await asyncio.to_thread(
            Store, settings.db, replica=settings.replica.name, exclusive=True
        )
        with heap.freezing():  # the fleet read is long-lived: out of later collector passes
            stored = await asyncio.to_thread(store.load)
            open_findings, baselines = await asyncio.to_thread(store.load_drift)
        await asyncio.to_thread(
            store.finish_interrupted_validations, utcnow(), settings.replica.alive_s
        )
    except StoreError as exc:
        raise Unavailable(str(exc), hint="check --db and that the database is reachable") from exc
    s = settings.store
    writer = Writer(store, queue_max=s.queue_max, batch_max=s.batch_max, linger_s=s.linger_s)
    state = LiveState()
    recipes = ResolutionCache(catalog, driver_owners=settings.recipes.driver_owner)
    drift = DriftEngine(catalog.drift, utcnow, xids=catalog.xids)
    evaluator = Evaluator(state, recipes, settings.recipes, drift)
    # SQLite is one process; on PostgreSQL other replicas may write the same database.
    shared = make_url(settings.db).get_backend_name() == "postgresql"
    membership = Membership(settings.replica.name, tailing=shared)

    registry = new_registry(writer)
    loop_lag = LoopLag(registry)
    drift_metrics = DriftMetrics(registry, state, evaluator, membership)
    page = MetricsPage(
        registry, NodeSeries(state, evaluator, membership), SensorSeries(state, membership)
    )

    rows = NodeRows(state, evaluator, lambda o: NodeOut.of(o).model_dump(mode="json"))

    # The stacks nodes were validated at, noted as each run finishes (and counted), and the
    # rollout gates per pool (GET /v1/gates, plumb_gate_open) decided from them.
    def latest_results() -> dict[str, list[CheckResult]]:
        return validator.latest_by_node()  # the validator is built below

    stacks = ValidatedStacks(state, latest_results)
    gates = Gates(state, evaluator, stacks, latest_results, settings.gates)

    def touched(name: str) -> None:
        """A node changed: what /metrics, the node lists and its pool's gate show of it is
        rendered again."""
        page.touched(name)
        rows.touched(name)
        gates.touched(name)

    def seen(name: str) -> None:
        """Only a node's report time moved: the one line and field that show it."""
        page.seen(name)
        rows.seen(name)

    intake = Intake(
        state,
        writer,
        evaluator,
        drift_metrics.count,
        touched,
        utcnow,
        seen=seen,
        sensed=page.sensed,
        replica=settings.replica.name,
        write_heartbeats=shared,
        keep_history=settings.nodes.keep_history,
    )
    loaded = intake.restore(stored, open_findings, baselines)
    log.info("state loaded", extra={"nodes": len(state), "db": _redact(settings.db)})
    replicas = Replicas(
        settings.replica,
        membership,
        idle_timeout_s=settings.ingest.idle_timeout_s,
        store=store,
        state=state,
        intake=intake,
        clock=utcnow,
        loaded=stored,
    )

    retention = Retention(store, settings.store, lambda: membership.leader == settings.replica.name)
    PrunedRows(registry, retention)

    api = _kube_api(settings)
    cluster = None
    if api is not None and settings.kubernetes.mode == "auto":
        cluster = Cluster(
            api,
            settings,
            catalog,
            intake.cluster_facts,
            lambda: node_marks(
                state,
                evaluator,
                settings.kubernetes.agent_stale_s,
                utcnow(),
                validator.latest_by_node(),
            ),
            Remediator(
                api,
                settings.remediation,
                evaluator,
                RemediationActions(registry).count,
                settings.replica.name,
                utcnow,
            ),
            ClusterErrors(registry).count,
        )
        LeaderCollector(registry, cluster.is_leader)
    kube = None
    if api is not None and settings.validation.kubernetes == "auto":
        leader = cluster.is_leader if cluster is not None else _always
        kube = Kube(
            api,
            settings.validation.namespace,
            leader=leader,
            recipe=lambda: cluster_recipe(catalog, map(evaluator.resolution, state.nodes())),
        )

    streams = Streams(settings.ingest.outbound_queue_max)

    def baseline_gpus(node: str) -> int | None:
        base = evaluator.drift.baselines.get(node)
        return base.gpu_count if base is not None else None

    fleet = FleetBaselines(store, writer, state, intake, evaluator, catalog.drift)

    async def save(run: ValidationRun) -> None:
        await asyncio.to_thread(store.save_validation, run)
        if run.finished_at is not None:
            await fleet.regrade()  # the figures just stored move the twins' baselines

    validation_metrics = ValidationMetrics(registry)

    def finished(run: ValidationRun) -> None:
        validation_metrics.finished(run)
        stacks.record(run)

    v = settings.validation
    validator = Validator(
        catalog,
        state,
        evaluator.resolution,
        baseline_gpus,
        streams.send,
        save,
        finished,
        utcnow,
        max_parallel_nodes=v.max_parallel_nodes,
        grace_s=v.grace_s,
        default_deadline_s=v.default_deadline_s,
        keep_runs=v.keep_runs,
        kube=kube,
        prometheus=Prometheus(v.prometheus_url) if v.prometheus_url else None,
    )
    ValidationResults(registry, validator)
    GateCollector(registry, lambda: ((g.pool, g.open) for g in gates.all()))
    try:
        scheduler = Scheduler(
            validator,
            state,
            v.schedule,
            is_leader=lambda: membership.leader == settings.replica.name,
            utilization=busiest_gpu,
            count=ScheduleMetrics(registry).count,
            clock=utcnow,
        )
    except ValueError as exc:
        raise InvalidInput(str(exc), hint="set PLUMB_VALIDATION__SCHEDULE to known phases") from exc
    ingest = Ingest(
        streams,
        intake,
        state,
        writer,
        validator,
        settings.ingest,
        IngestMetrics(registry),
        build_authenticator(settings.auth),
    )
    restored = asyncio.Event()
    if not loaded:
        restored.set()
    core = Core(
        settings,
        state,
        store,
        writer,
        catalog,
        recipes,
        evaluator,
        intake,
        validator,
        page,
        rows,
        restored,
        cluster,
        gates,
        fleet,
    )
    return Process(
        settings,
        core,
        store,
        writer,
        streams,
        ingest,
        intake,
        replicas,
        retention,
        scheduler,
        cluster,
        loaded,
        restored,
        loop_lag,
    )


class _EmbeddedUvicorn(uvicorn.Server):
    """Uvicorn without its own signal handling: `serve` owns SIGTERM and the shutdown order."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


async def _serve_http(http: uvicorn.Server) -> None:
    """Uvicorn exits the process when it cannot bind; turn that into this task ending."""
    try:
        await http.serve()
    except SystemExit:
        pass  # uvicorn has logged why; serve() sees `started` is False


async def _cancel(task: asyncio.Task | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def split_listen(addr: str) -> tuple[str, int]:
    """'HOST:PORT' (or '[::1]:PORT') as (host, port)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


async def serve(settings: AggregatorSettings, port: Port) -> None:
    """Run until SIGTERM or SIGINT, then close streams, flush writes and stop.

    `port` is the agents' port, opened before this module was imported (ingest/port.py): its
    gate holds the streams that arrive until the stored nodes are loaded and ingest is built
    here. Their evaluation follows in the background (`Process.restore`), and /readyz
    reports `restored: false` until it is done.
    """
    server = port.server
    try:
        p = await open_process(settings)
        # A bad tokens file stops start-up before anything is served.
        app = create_app(p.core)
    except BaseException:
        await server.stop(0)
        raise
    writer_task = asyncio.create_task(p.writer.run(), name="store-writer")
    tail_task = asyncio.create_task(p.replicas.run(), name="replica-tail")
    expire_task = asyncio.create_task(p.expire_nodes(), name="node-expiry")
    prune_task = asyncio.create_task(p.retention.run(p.restored), name="retention")
    schedule_task = asyncio.create_task(p.scheduler.run(p.restored), name="validation-schedule")
    heap_task = asyncio.create_task(heap.run(settings.gc_full_pass_s), name="heap")
    lag_task = asyncio.create_task(p.loop_lag.run(), name="loop-lag")
    port.ready.set_result(p.ingest)  # held streams go on to Hello and Welcome from here
    # Nodes, components and the Lease (aggregator/k8s/cluster.py); None for the demo.
    cluster_task = asyncio.create_task(p.cluster.run(), name="kubernetes") if p.cluster else None

    http_host, http_port = split_listen(settings.http_listen)
    http = _EmbeddedUvicorn(
        uvicorn.Config(
            app,
            host=http_host,
            port=http_port,
            log_config=None,
            access_log=False,
            # The app applies X-Forwarded-* from api.trusted_proxies itself (api/access.py
            # TrustedProxies); uvicorn's own would trust loopback and hide the direct peer.
            proxy_headers=False,
            ssl_certfile=settings.tls.cert_file,
            ssl_keyfile=settings.tls.key_file,
        )
    )
    http_task = asyncio.create_task(_serve_http(http), name="http")
    # After the ports open: reconnecting agents resync while restored nodes are evaluated.
    restore_task = asyncio.create_task(p.restore(), name="restore")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "aggregator started",
        extra={
            "grpc": settings.grpc_listen,
            "http": settings.http_listen,
            "tls": settings.tls.enabled,
        },
    )
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, http_task}, return_when=asyncio.FIRST_COMPLETED)
    restore_task.cancel()
    await asyncio.gather(restore_task, return_exceptions=True)
    if http_task.done() and not http.started:
        await _cancel(cluster_task)
        await server.stop(0)
        raise Unavailable(
            f"cannot serve HTTP on {settings.http_listen}",
            hint="is the port taken? pick a free --http-listen address",
        )

    log.info("aggregator stopping")
    await _cancel(cluster_task)  # first: releasing the Lease lets another replica lead at once
    p.streams.close_all()
    await server.stop(_GRACE_S)
    http.should_exit = True
    await http_task
    await p.writer.flush(timeout_s=_GRACE_S * 2)
    housekeeping = (
        lag_task,
        heap_task,
        schedule_task,
        prune_task,
        expire_task,
        tail_task,
        writer_task,
    )
    for task in housekeeping:
        task.cancel()
    await asyncio.gather(*housekeeping, return_exceptions=True)
    p.store.close()
    log.info("aggregator stopped")


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
