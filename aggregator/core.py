"""The aggregator's queries: what the API, the web page and the CLI ask of the live state.

Routes and commands call one method here (or the one core object it names) and render the
result; the process module (process.py) builds this and everything it reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson
from pydantic import TypeAdapter

from plumb import nccltests
from plumb.aggregator import __version__, aicr
from plumb.aggregator.bundle import Bundle, BundleOptions, Recipe, build, parse_recipe
from plumb.aggregator.drift import SEVERITIES, Baseline, DriftFinding, whatif
from plumb.aggregator.drift.evaluation import Evaluator, pool_name
from plumb.aggregator.drift.twins import FleetBaseline
from plumb.aggregator.drift.whatif import WhatIf
from plumb.aggregator.errors import Conflict, InvalidInput, NotFound, TooLarge, Unavailable
from plumb.aggregator.fleet_baselines import FleetBaselines
from plumb.aggregator.gates import Gates
from plumb.aggregator.intake.intake import Intake
from plumb.aggregator.k8s import Cluster, Uncordoned
from plumb.aggregator.metrics.collectors import MetricsPage
from plumb.aggregator.recipes import Catalog, Criteria, Resolution, ResolutionCache
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.state.live import LiveState, NodeState, NodeSummary, utcnow
from plumb.aggregator.store import HistoryEntry, Store, StoreError, Writer
from plumb.aggregator.timeline import ChangeEvent, fact_like, group_changes
from plumb.aggregator.validation import ValidationRun, Validator
from plumb.aggregator.validation.benchmarks import external_runs
from plumb.facts import Reading

log = logging.getLogger(__name__)

__all__ = ["Core", "NodeRow", "NodeRows", "Overview", "overview_of"]

# The most fact-change rows one timeline query groups: ~40 MB of rows at most in memory.
_TIMELINE_ROWS = 200_000


@dataclass(frozen=True)
class Overview:
    """One node as lists show it: its summary, pool (its resolved criteria,
    `service/accelerator/os/intent/platform`, None until first resolved), NCCL and CUDA
    runtime versions, and its open drift findings counted by severity."""

    summary: NodeSummary
    pool: str | None
    nccl_version: str | None
    cuda_runtime_version: str | None
    findings: dict[str, int]

    @property
    def drifted(self) -> bool:
        """Whether any drift finding is open."""
        return any(self.findings.values())


def overview_of(node: NodeState, evaluator: Evaluator) -> Overview:
    """The node's summary with what lists show beside it: pool, NCCL, CUDA, findings."""
    resolution = evaluator.resolutions.get(node.name)
    view = evaluator.view(node)
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in evaluator.drift.open_findings(node.name):
        counts[f.severity] += 1
    return Overview(
        summary=NodeSummary.of(node),
        pool=pool_name(resolution) if resolution is not None else None,
        nccl_version=_joined(view.get("nccl.version")),
        cuda_runtime_version=_joined(view.get("cuda.runtime_version")),
        findings=counts,
    )


# How a report time reads in a row: as the API's models write a datetime.
_AT = TypeAdapter(datetime | None)


class NodeRow:
    """One node's list row: `out`, its JSON form (the API's NodeOut as `model_dump(mode=
    "json")` gives it), and `json`, that dict as compact JSON, as FastAPI would send it."""

    __slots__ = ("json", "out")

    def __init__(self, out: dict):
        self.out = out
        # What json.dumps writes for its text, integers, booleans and nulls. orjson's bytes keep
        # its whole ~8 KiB write buffer, and a row lives as long as its node: a copy its size.
        self.json = bytes(memoryview(orjson.dumps(out)))

    def live(self, connected: bool, at: datetime | None) -> NodeRow:
        """This row with another connection and report time (a heartbeat, or a stream's open
        or end with the facts held, moves nothing else)."""
        at_json = _AT.dump_python(at, mode="json")
        return NodeRow({**self.out, "connected": connected, "last_report_at": at_json})


class _Held:
    """A node's row and what it was rendered from, compared by identity at each touch."""

    __slots__ = ("connected", "facts", "last_report_at", "resolution", "row", "severities")


class NodeRows:
    """Each node's list row, rendered when the intake touches the node and kept.

    /v1/nodes and the fleet page are polled (every open browser every 2 s); rendering
    1,000 rows per request took ~100 ms on the event loop. A touch re-renders the node's row
    only when its facts, recipe or open findings changed; a heartbeat, or a stream opened or
    ended on the facts held (every node's resume after a restart), swaps those fields. Nodes
    restored from the store before their first evaluation have no touch yet, and are
    rendered when a list first misses them.
    """

    def __init__(self, state: LiveState, evaluator: Evaluator, render: Callable[[Overview], dict]):
        self._state = state
        self._evaluator = evaluator
        self._render = render  # an Overview as the API writes a node in lists
        self._held: dict[str, _Held] = {}
        self._order: list[_Held] | None = []  # by name; None once a node comes or goes

    def touched(self, name: str) -> None:
        """Re-render what changed of node `name`'s row; drop it when the node is gone."""
        node = self._state.get(name)
        if node is None:
            if self._held.pop(name, None) is not None:
                self._order = None
            return
        ev = self._evaluator
        resolution = ev.resolutions.get(name)
        severities = tuple(f.severity for f in ev.drift.open_findings(name))
        held = self._held.get(name)
        if held is None:
            held = self._held[name] = _Held()
            self._order = None
        elif (
            held.facts is node.facts
            and held.resolution is resolution
            and held.severities == severities
        ):
            if (held.connected, held.last_report_at) != (node.connected, node.last_report_at):
                held.row = held.row.live(node.connected, node.last_report_at)
                held.connected, held.last_report_at = node.connected, node.last_report_at
            return
        held.facts, held.connected, held.resolution = node.facts, node.connected, resolution
        held.severities, held.last_report_at = severities, node.last_report_at
        held.row = NodeRow(self._render(overview_of(node, ev)))

    def seen(self, name: str) -> None:
        """Only node `name`'s report time moved (a heartbeat): swap that field of its row."""
        node, held = self._state.get(name), self._held.get(name)
        if node is None or held is None:
            self.touched(name)
        elif held.last_report_at != node.last_report_at:
            held.row = held.row.live(held.connected, node.last_report_at)
            held.last_report_at = node.last_report_at

    def rows(self, *, pool: str | None = None, drifted: bool | None = None) -> list[NodeRow]:
        """Every node's row, by name, optionally only one pool or drift state."""
        if len(self._held) != len(self._state):  # restored, not yet evaluated: rare
            names = {n.name for n in self._state.nodes()}
            for name in names ^ self._held.keys():
                self.touched(name)
        if self._order is None:
            self._order = [self._held[n] for n in sorted(self._held)]
        return [
            h.row
            for h in self._order
            if (pool is None or h.row.out["pool"] == pool)
            and (drifted is None or h.row.out["drifted"] == drifted)
        ]


class Core:
    """The queries over one aggregator process's live state, store and validator."""

    def __init__(
        self,
        settings: AggregatorSettings,
        state: LiveState,
        store: Store,
        writer: Writer,
        catalog: Catalog,
        recipes: ResolutionCache,
        evaluator: Evaluator,
        intake: Intake,
        validator: Validator,
        page: MetricsPage,
        rows: NodeRows,
        restored: asyncio.Event,
        cluster: Cluster | None,
        gates: Gates,
        fleet: FleetBaselines,
    ):
        self.settings = settings
        self.catalog = catalog
        # Recipes for explicit criteria (CriteriaError names bad values) and validation runs
        # are asked of these directly.
        self.recipes = recipes
        self.validator = validator
        self._state = state
        self._store = store
        self._writer = writer
        self._evaluator = evaluator
        self._intake = intake
        self._page = page
        self._rows = rows
        # Set once the nodes loaded from the store are evaluated (/readyz waits for it).
        self._restored = restored
        # The Kubernetes side; None outside a cluster without a kubeconfig (the demo).
        self._cluster = cluster
        # Rollout gates per pool (GET /v1/gates); also read by plumb_gate_open.
        self.gates = gates
        self._fleet = fleet

    def metrics_page(self) -> list[bytes]:
        """The /metrics page in pieces: registry families, then the per-node families
        rendered as nodes changed (a scrape joins cached bytes)."""
        return self._page.render()

    async def metrics_page_gzip(self) -> bytes:
        """The /metrics page gzip-encoded."""
        return await self._page.render_gzip()

    def sensors_page(self) -> Iterator[bytes]:
        """The /metrics/sensors page in pieces, joined as they are sent."""
        return self._page.sensors()

    def recipe_for_node(self, name: str) -> Resolution:
        """The recipe resolved from the node's live facts."""
        return self._evaluator.resolution(self.node(name))

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
        if options.vendor_charts:
            # Pulling would make the aggregator fetch whatever URL an uploaded recipe names.
            raise InvalidInput(
                "vendor_charts: the aggregator does not fetch charts; they are pulled where"
                " plumb bundle runs",
                hint="plumb bundle --vendor-charts (with --recipe FILE for a node's recipe)",
            )
        facts = None
        if node is not None:
            source = Recipe.of(self.recipe_for_node(node))
            facts = self.node(node).facts
        elif criteria is not None:
            source = Recipe.of(self.recipes.resolve(criteria))
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
            for f in self._evaluator.drift.open_findings(node)
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
        await self._writer.flush()
        try:
            return await asyncio.to_thread(self._store.findings, since=since, **filters)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="closed findings need the database") from exc

    def accept_baseline(self, name: str) -> Baseline:
        """Accept the node's current stack as its baseline; baseline findings close."""
        return self._intake.accept_baseline(self.node(name))

    def remove_node(self, name: str) -> None:
        """Forget a node whose agent no longer streams; Conflict while it does (it would only
        come back)."""
        node = self.node(name)
        if node.connected:
            raise Conflict(
                f"node {name!r} has an agent streaming to this aggregator",
                hint="stop its agent (or drain and delete the node) first, then remove it",
            )
        self._intake.remove(node)

    async def uncordon(self, name: str, actor: str) -> Uncordoned:
        """Undo Plumb's cordon of Node `name` for `actor`; its open findings count as seen, so
        Plumb cordons it again only for a new one. Conflict when Plumb did not cordon it."""
        if self._cluster is None:
            raise Conflict(
                "this aggregator has no Kubernetes side, so it cordons nothing",
                hint="run it in the cluster, or give it PLUMB_AUTH__KUBECONFIG",
            )
        open_ids = [f.id for f in self._evaluator.drift.open_findings(name)]
        return await asyncio.to_thread(self._cluster.remediator.uncordon, name, actor, open_ids)

    def nodes(self) -> list[NodeState]:
        """Every known node, by name."""
        return list(self._state.nodes())

    def node(self, name: str) -> NodeState:
        """The node called `name`; NotFound when no agent ever reported it."""
        node = self._state.get(name)
        if node is None:
            raise NotFound(f"no node named {name!r}", hint="`plumb nodes` lists the known nodes")
        return node

    async def history(
        self, name: str, since: datetime | None = None, limit: int = 100
    ) -> list[HistoryEntry]:
        """The node's fact changes, newest first."""
        self.node(name)
        try:
            return await asyncio.to_thread(self._store.history, name, since, limit)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="history needs the database; retry shortly") from exc

    async def changes(
        self,
        since: datetime,
        until: datetime,
        *,
        pool: str | None = None,
        fact: str | None = None,
        gap: timedelta = timedelta(minutes=30),
    ) -> list[ChangeEvent]:
        """The fleet's fact changes in [since, until] as events, newest first."""
        await self._writer.flush()
        like = fact_like(fact) if fact else None
        try:
            rows = await asyncio.to_thread(
                self._store.fleet_history, since, until, like, _TIMELINE_ROWS + 1
            )
            found = await asyncio.to_thread(self._store.findings, since=since, limit=10_000)
            runs = await self.validations(limit=200)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="the timeline needs the database") from exc
        if len(rows) > _TIMELINE_ROWS:
            raise TooLarge(
                f"more than {_TIMELINE_ROWS:,} fact changes between {since:%Y-%m-%d %H:%M} "
                f"and {until:%Y-%m-%d %H:%M}",
                hint="narrow since/until, or pick one fact or pool",
            )
        pools = self._evaluator.pools
        pool_of = {name: p for p, names in pools.items() for name in names}
        sizes = {p: len(names) for p, names in pools.items()}
        events = group_changes(rows, pool_of, sizes, found, runs, gap=gap)
        return [e for e in events if pool is None or e.pool == pool]

    async def whatif(
        self, plan: Mapping[str, str], pools: tuple[str, ...] = (), chunk: int = 100
    ) -> WhatIf:
        """The plan judged on every live node of `pools` (all pools when none), `chunk` nodes
        per turn of the loop; InvalidInput for a bad plan, NotFound for a pool with no node."""
        checked = whatif.check_plan(plan, self.catalog.drift.whatif)
        known = self._evaluator.pools
        for pool in pools:
            if not known.get(pool):
                listed = ", ".join(sorted(p for p, names in known.items() if names)) or "none yet"
                raise NotFound(f"no node is in pool {pool!r}", hint=f"pools: {listed}")
        members = [
            (pool, name) for pool in sorted(set(pools) or known) for name in sorted(known[pool])
        ]
        answers = []
        for i, (pool, name) in enumerate(members, 1):
            node = self._state.get(name)
            if node is not None:
                resolve = self._evaluator.resolve_facts
                answers.append(whatif.judge(name, pool, node.facts, checked, resolve, self.catalog))
            if i % chunk == 0:
                await asyncio.sleep(0)
        return whatif.summarize(checked, answers)

    def overview(self, node: NodeState) -> Overview:
        """The node's summary with what lists show beside it: pool, NCCL, CUDA, findings."""
        return overview_of(node, self._evaluator)

    def node_rows(self, *, pool: str | None = None, drifted: bool | None = None) -> list[NodeRow]:
        """Every node's list row, by name, optionally only one pool or drift state; cached
        per node (NodeRows), so a list costs a filter and a join, not a render per node."""
        return self._rows.rows(pool=pool, drifted=drifted)

    async def aicr_snapshots(self, node: str | None = None) -> Iterator[dict]:
        """AICR Snapshot documents: one for `node`, else one per known node, by name.

        Like `snapshot`: captured here, each document built only as the caller iterates.
        """
        nodes = [self.node(node)] if node is not None else list(self._state.nodes())
        rows = [(n.name, n.facts, self._evaluator.resolutions.get(n.name)) for n in nodes]
        at, count = utcnow(), len(self._state)
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

    async def validation(self, run_id: str) -> ValidationRun:
        """A validation run, running or finished (from memory, else from the store)."""
        run = self.validator.get(run_id)
        if run is not None:
            return run
        try:
            run = await asyncio.to_thread(self._store.validation, run_id)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="older runs are read from the database") from exc
        if run is None:
            raise NotFound(f"no validation run {run_id!r}", hint="GET /v1/validations lists them")
        return run

    async def attach_benchmark(self, text: str, nodes: tuple[str, ...] = ()) -> list[ValidationRun]:
        """Grade each nccl-tests run in the log `text` (run outside Plumb) for the nodes it ran
        on, and store it as a finished validation run; InvalidInput / NotFound say what is
        missing."""
        parsed = await asyncio.to_thread(nccltests.parse, text)
        runs = external_runs(parsed, self._state, self.catalog, utcnow(), nodes)
        for run in runs:
            try:
                await self.validator.attach(run)
            except StoreError as exc:
                raise Unavailable(str(exc), hint="benchmarks are stored; retry shortly") from exc
        return runs

    async def baselines(self) -> list[FleetBaseline]:
        """What each group of twins (GPU model, GPU count, fabric) measures on each check,
        learned from the known nodes' latest figures."""
        try:
            return await self._fleet.baselines()
        except StoreError as exc:
            raise Unavailable(str(exc), hint="baselines are learned from stored runs") from exc

    async def validations(self, limit: int = 20) -> list[ValidationRun]:
        """Recent validation runs, newest first: those in memory (running or just finished),
        then the stored ones, which include runs from before a restart."""
        held = self.validator.recent()
        try:
            stored = await asyncio.to_thread(self._store.validations, limit)
        except StoreError as exc:
            raise Unavailable(str(exc), hint="older runs are read from the database") from exc
        ids = {r.id for r in held}
        runs = held + [r for r in stored if r.id not in ids]
        return sorted(runs, key=lambda r: r.created_at, reverse=True)[:limit]

    async def snapshot(
        self, node: str | None = None, chunk: int = 500
    ) -> Iterator[tuple[NodeSummary, Mapping[str, Reading]]]:
        """The whole cluster (or node `node`): each node's summary and facts, by name.

        Captured here, `chunk` nodes per turn of the loop, so the caller can render node by
        node in a thread without holding 10,000 nested trees at once. Facts dicts are
        replaced, never edited in place, so what was captured stays consistent.
        """
        nodes = [self.node(node)] if node is not None else list(self._state.nodes())
        rows = []
        for i, n in enumerate(nodes, 1):
            rows.append((NodeSummary.of(n), n.facts))
            if i % chunk == 0:
                await asyncio.sleep(0)
        return iter(rows)

    def replica(self) -> dict:
        """This replica's part in the cluster: whether it watches Kubernetes and leads."""
        if self._cluster is None:
            return {"kubernetes": False, "leader": None, "identity": None}
        return {
            "kubernetes": True,
            "leader": self._cluster.is_leader(),
            "identity": self._cluster.identity,
        }

    async def readiness(self) -> dict[str, bool]:
        """Which dependencies work right now, and whether restored nodes are evaluated yet;
        ready only when all are true."""
        try:
            await asyncio.to_thread(self._store.ping)
            database = True
        except StoreError:
            database = False
        return {
            "database": database,
            "writer": self._writer.healthy,
            "restored": self._restored.is_set(),
        }


def _joined(values: tuple[str, ...]) -> str | None:
    """A view fact's distinct values joined by ", ", as lists show them; None when none."""
    return ", ".join(values) or None
