"""Opt-in remediation: the leader cordons a node with an open finding that calls for it
(critical health by default), behind a per-pool circuit breaker; `plumb uncordon` undoes it.

Cordon only, never drain: running jobs finish or fail on their own, and a person decides what
happens to them. Plumb owns only the cordons it made, marked by the `plumb.dev/cordoned-by`
annotation (the findings and the time); a node unschedulable without it is someone else's,
never touched, but it counts against the breaker like any other unschedulable node of its pool.

Plumb never uncordons on its own when the finding closes: an XID 79 "closes" when the GPU
comes back after a reset, which is when an SRE wants to look before jobs land on it again.
Uncordoning, by `plumb uncordon` or by `kubectl uncordon` of a node Plumb cordoned, marks the
findings open then as seen (`plumb.dev/uncordoned-by`), so Plumb does not cordon the node again
for them; a new finding cordons it again.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal

from kubernetes import client

from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.errors import Conflict, NotFound, Unavailable
from plumb.aggregator.k8s.nodes import CORDONED_BY, UNCORDONED_BY, NodeInfo
from plumb.aggregator.settings import RemediationSettings

log = logging.getLogger(__name__)

_STRATEGIC = "application/strategic-merge-patch+json"
_TIMEOUT_S = 10

# Counts one remediation action: cordon, uncordon, or blocked (by the breaker).
CountAction = Callable[[str], None]


@dataclass(frozen=True)
class Cordon:
    """A Node's cordon as Plumb reads it."""

    unschedulable: bool
    # The findings Plumb cordoned it for; None when Plumb did not cordon it.
    cordoned_for: frozenset[str] | None = None
    # The findings a person uncordoned it past: Plumb does not cordon it again for these.
    seen: frozenset[str] = frozenset()


def _ids(raw: str | None) -> frozenset[str] | None:
    """The finding ids an annotation of Plumb's lists; None when absent or not Plumb's JSON."""
    if raw is None:
        return None
    try:
        ids = json.loads(raw).get("ids")
    except (ValueError, AttributeError):
        return None  # hand-edited: treat as absent rather than guess
    return frozenset(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else None


def cordon_of(info: NodeInfo) -> Cordon:
    """The cordon state of a watched Node; a node Plumb cordoned that someone uncordoned with
    kubectl counts its findings as seen."""
    cordoned_for = _ids(info.remediation.get(CORDONED_BY))
    seen = _ids(info.remediation.get(UNCORDONED_BY)) or frozenset()
    if cordoned_for is not None and not info.unschedulable:
        seen |= cordoned_for
    return Cordon(info.unschedulable, cordoned_for, seen)


def cordon_cap(pool_size: int, settings: RemediationSettings) -> int:
    """How many of a pool's nodes may be unschedulable at most once Plumb cordons one more:
    the configured share of the pool rounded down (exactly: 0.3 of 10 is 3), then the
    absolute cap."""
    cap = math.floor(Fraction(str(settings.max_cordoned_fraction)) * pool_size)
    if settings.max_cordoned_nodes is not None:
        cap = min(cap, settings.max_cordoned_nodes)
    return cap


@dataclass(frozen=True)
class Decision:
    """What to do about one schedulable node with findings that call for a cordon."""

    node: str
    action: Literal["cordon", "blocked"]
    findings: tuple[DriftFinding, ...]
    pool: str
    # The pool's unschedulable nodes before this decision, its nodes, and the breaker's cap.
    unschedulable: int
    pool_size: int
    cap: int

    @property
    def share(self) -> str:
        """`unschedulable/size (cap N)` after this cordon, for the log."""
        after = self.unschedulable + (self.action == "cordon")
        return f"{after}/{self.pool_size} (cap {self.cap})"


def finding_name(f: DriftFinding) -> str:
    """`health gpu3/xid-79`: how findings are named in the annotation and the log."""
    return f"{f.kind} {f.component}"


def plan(
    pools: Mapping[str, Iterable[str]],
    nodes: Mapping[str, Cordon],
    findings: Callable[[str], list[DriftFinding]],
    settings: RemediationSettings,
) -> list[Decision]:
    """Every schedulable Node with an open finding of the configured kinds and severities not
    yet seen: cordon it while its pool stays within the breaker's cap, else blocked.

    A pool counts its members that exist as Nodes; every unschedulable one counts, whoever
    cordoned it. Pools and nodes go in name order, so the same state gives the same plan.
    """
    out = []
    for pool in sorted(pools):
        members = sorted(n for n in pools[pool] if n in nodes)
        cap = cordon_cap(len(members), settings)
        down = sum(nodes[n].unschedulable for n in members)
        for name in members:
            node = nodes[name]
            if node.unschedulable:
                continue
            why = tuple(
                f
                for f in findings(name)
                if f.kind in settings.kinds
                and f.severity in settings.severities
                and f.id not in node.seen
            )
            if not why:
                continue
            action: Literal["cordon", "blocked"] = "cordon" if down + 1 <= cap else "blocked"
            out.append(Decision(name, action, why, pool, down, len(members), cap))
            down += action == "cordon"
    return out


@dataclass(frozen=True)
class Uncordoned:
    """An uncordon done: the node, what Plumb had cordoned it for and when, and who asked."""

    node: str
    findings: tuple[str, ...]
    cordoned_at: str | None
    by: str
    was_unschedulable: bool


def _time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Remediator:
    """The Nodes' cordon states (fed by the watcher), the leader's cordons, and uncordons."""

    def __init__(
        self,
        api: client.ApiClient,
        settings: RemediationSettings,
        evaluator: Evaluator,
        count: CountAction,
        identity: str,
        clock: Callable[[], datetime],
    ):
        self.settings = settings
        self._core = client.CoreV1Api(api)
        self._evaluator = evaluator
        self._count = count
        self._identity = identity
        self._clock = clock
        self._nodes: dict[str, Cordon] = {}
        # Cordoned by this leader, until the watch shows it: a round before the watch catches
        # up must count them, or the breaker would let one more through.
        self._cordoned_here: set[str] = set()
        # Nodes held back by the breaker, with the findings: logged and counted once each.
        self._blocked: dict[str, frozenset[str]] = {}

    def observe(self, info: NodeInfo) -> None:
        """A Node as the watcher last saw it."""
        self._nodes[info.name] = cordon_of(info)
        if info.unschedulable:
            self._cordoned_here.discard(info.name)

    def drop(self, name: str) -> None:
        """A Node deleted."""
        self._nodes.pop(name, None)
        self._cordoned_here.discard(name)

    def forget(self) -> None:
        """On gaining the Lease: what an earlier term did is in the Nodes now."""
        self._cordoned_here.clear()
        self._blocked.clear()

    def due(self) -> list[Decision]:
        """The cordons due now. Logs and counts the nodes the breaker holds back, once per
        node and findings, not once per round."""
        view = {
            n: replace(c, unschedulable=True) if n in self._cordoned_here else c
            for n, c in self._nodes.items()
        }
        decisions = plan(
            self._evaluator.pools, view, self._evaluator.drift.open_findings, self.settings
        )
        blocked = {}
        for d in decisions:
            if d.action != "blocked":
                continue
            blocked[d.node] = ids = frozenset(f.id for f in d.findings)
            if self._blocked.get(d.node) != ids:
                log.warning(
                    "cordon blocked by the circuit breaker",
                    extra={
                        "node": d.node,
                        "findings": [finding_name(f) for f in d.findings],
                        "pool": d.pool,
                        "pool_share": d.share,
                        "actor": self._identity,
                    },
                )
                self._count("blocked")
        self._blocked = blocked
        return [d for d in decisions if d.action == "cordon"]

    def cordon(self, d: Decision) -> None:
        """Cordon `d.node` unless someone else did since the watch saw it (blocking: run it in
        a thread). The patch carries the read's resourceVersion, so a cordon by someone else
        in between makes it fail rather than take their cordon over."""
        node = self._core.read_node(d.node, _request_timeout=_TIMEOUT_S)
        if node.spec.unschedulable:
            return  # theirs: the watch will say so
        mark = {
            "findings": [f"{finding_name(f)} ({f.severity})" for f in d.findings],
            "ids": sorted(f.id for f in d.findings),
            "at": _time(self._clock()),
            "by": self._identity,
        }
        patch = {
            "metadata": {
                "resourceVersion": node.metadata.resource_version,
                "annotations": {CORDONED_BY: json.dumps(mark)},
            },
            "spec": {"unschedulable": True},
        }
        # Before the patch: the watch may deliver the cordon before this thread returns.
        self._cordoned_here.add(d.node)
        try:
            self._core.patch_node(
                d.node, patch, _content_type=_STRATEGIC, _request_timeout=_TIMEOUT_S
            )
        except BaseException:
            self._cordoned_here.discard(d.node)
            raise
        self._count("cordon")
        log.warning(
            "node cordoned",
            extra={
                "node": d.node,
                "findings": mark["findings"],
                "pool": d.pool,
                "pool_share": d.share,
                "actor": self._identity,
            },
        )

    def uncordon(self, name: str, actor: str, open_ids: Iterable[str]) -> Uncordoned:
        """Make a node Plumb cordoned schedulable again, its open findings (`open_ids`) seen,
        for `actor` (blocking: run it in a thread). Conflict for a node Plumb did not cordon."""
        try:
            node = self._core.read_node(name, _request_timeout=_TIMEOUT_S)
        except client.ApiException as exc:
            raise _api_error(exc, name) from exc
        body: dict[str, Any] = self._core.api_client.sanitize_for_serialization(node)
        annotations = body["metadata"].get("annotations") or {}
        cordoned_for = _ids(annotations.get(CORDONED_BY))
        if cordoned_for is None:
            raise Conflict(
                f"node {name} was not cordoned by Plumb: it has no {CORDONED_BY} annotation",
                hint="Plumb uncordons only its own cordons; `kubectl uncordon` undoes others'",
            )
        mark = json.loads(annotations[CORDONED_BY])
        seen = {
            "ids": sorted(cordoned_for | set(open_ids)),
            "at": _time(self._clock()),
            "by": actor,
        }
        patch = {
            "metadata": {
                "resourceVersion": body["metadata"]["resourceVersion"],
                "annotations": {CORDONED_BY: None, UNCORDONED_BY: json.dumps(seen)},
            },
            "spec": {"unschedulable": None},
        }
        try:
            self._core.patch_node(
                name, patch, _content_type=_STRATEGIC, _request_timeout=_TIMEOUT_S
            )
        except client.ApiException as exc:
            raise _api_error(exc, name) from exc
        done = Uncordoned(
            name,
            tuple(mark.get("findings") or ()),
            mark.get("at"),
            actor,
            bool((body.get("spec") or {}).get("unschedulable")),
        )
        self._count("uncordon")
        log.info(
            "node uncordoned",
            extra={"node": name, "findings": list(done.findings), "actor": actor},
        )
        return done


def _api_error(exc: client.ApiException, name: str) -> Exception:
    """The API server's refusal as Plumb's error."""
    if exc.status == 404:
        return NotFound(f"no Node {name} in the cluster", hint="`kubectl get nodes` lists them")
    if exc.status == 409:
        return Conflict(f"node {name} changed while it was being uncordoned", hint="run it again")
    if exc.status == 403:
        return Unavailable(
            f"the aggregator may not patch Node {name}",
            hint="the chart grants nodes patch with aggregator.cordon.enabled or nodeWrites",
        )
    return Unavailable(f"the Kubernetes API refused the uncordon of {name}: {exc.status}")
