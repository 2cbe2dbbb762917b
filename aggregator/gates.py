"""Validated stacks and rollout gates: has a node passed validation at the stack it runs now,
and may a rollout go on from a pool's canaries to the rest of it?

A node is validated at its stack when its latest result of every check it ran passed (the
gpu-health verdict is `pass`) and every one of them began after its stack last changed
(`NodeState.stack_since`, set by the intake when a stack fact changes). A pool's gate
(`GET /v1/gates/{pool}`, `plumb_gate_open`, `plumb gate POOL`) is open when its canary nodes,
those with the canary label, all

- run one stack, and a new one: not the stack most of the pool's other nodes run (nor one
  tied for most), or not the stack the canary was validated at before (so the gate stays
  open while the rest of the pool catches up, and after);
- were validated at it;
- match their twins: no open finding of a blocking kind (health, straggler, regression)
  and severity.

Every unmet condition is a reason, so a closed gate says what it waits for. Validation
results live in the process's memory (`Validator.latest`): after a restart every node is
unvalidated until it is validated again, so gates close rather than open on old news.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.errors import NotFound
from plumb.aggregator.settings import GateSettings
from plumb.aggregator.state.live import LiveState, NodeState
from plumb.aggregator.validation.model import CheckResult, ValidationRun, health

__all__ = [
    "CANARY_FACT",
    "LABEL_HASH_CHARS",
    "Gate",
    "Gates",
    "Member",
    "ValidatedStacks",
    "decide",
    "validated_stack",
]

# The fact the Node watcher (k8s/nodes.py) sets on nodes with the canary label.
CANARY_FACT = "cluster.canary"
# The `plumb.dev/validated-stack` label carries the stack hash's first 16 hex digits: label
# values stop at 63 characters, a SHA-256 takes 64, and 64 bits tell a fleet's stacks apart.
LABEL_HASH_CHARS = 16

LatestResults = Callable[[], Mapping[str, list[CheckResult]]]


def validated_stack(node: NodeState, results: Iterable[CheckResult]) -> str | None:
    """The node's stack hash if it passed validation at that stack, else None: its latest
    results (one per check) pass, and each began (finished_at - duration_s) after the stack
    it runs now first reached the aggregator."""
    if not node.stack_hash or node.stack_since is None:
        return None
    results = list(results)
    if health(results)[0] != "pass":
        return None
    for r in results:
        if r.finished_at is None:
            return None
        if r.finished_at - timedelta(seconds=r.duration_s) < node.stack_since:
            return None
    return node.stack_hash


class ValidatedStacks:
    """The stack each node was validated at before the one it is validated at now, taken at
    the end of every validation run (the only time a node's validation changes): what makes
    a canary's stack new once the rest of its pool runs it too. In memory, like the results."""

    def __init__(self, state: LiveState, latest: LatestResults):
        self._state = state
        self._latest = latest
        self._current: dict[str, str] = {}
        self._previous: dict[str, str] = {}
        # Counts the runs recorded: the results changed, so derived gates are stale.
        self.version = 0

    def record(self, run: ValidationRun) -> None:
        """Note the stacks the run's nodes are validated at now."""
        self.version += 1
        latest = self._latest()
        for name in run.nodes:
            node = self._state.get(name)
            stack = validated_stack(node, latest.get(name, ())) if node else None
            held = self._current.get(name)
            if stack is None or stack == held:
                continue
            if held is not None:
                self._previous[name] = held
            self._current[name] = stack

    def previous(self, name: str) -> str | None:
        """The stack `name` was validated at before its latest validated one."""
        return self._previous.get(name)


@dataclass(frozen=True)
class Member:
    """One node of a pool as its gate sees it."""

    name: str
    canary: bool
    connected: bool
    stack: str | None  # None: no stack facts yet
    validated: str | None = None  # the stack it passed validation at now (validated_stack)
    previous: str | None = None  # the stack it was validated at before that
    blocking: tuple[DriftFinding, ...] = ()


@dataclass(frozen=True)
class Gate:
    """A pool's rollout gate: open, or closed with the reasons."""

    pool: str
    open: bool
    reasons: tuple[str, ...]
    canaries: tuple[Member, ...]
    # The canaries' stack when they all run one; the stack most other nodes run (None when
    # none or a tie).
    stack: str | None
    pool_stack: str | None
    nodes: int

    @property
    def state(self) -> str:
        return "open" if self.open else "closed"


def _short(stack: str | None) -> str:
    return stack[:LABEL_HASH_CHARS] if stack else "-"


def decide(pool: str, members: Iterable[Member], canary_label: str) -> Gate:
    """The gate of `pool` from its members (pure: tests hand it the members)."""
    members = list(members)
    rest = Counter(m.stack for m in members if not m.canary and m.stack is not None)
    return _verdict(pool, [m for m in members if m.canary], rest, len(members), canary_label)


def _verdict(
    pool: str, canaries: Iterable[Member], rest: Counter, nodes: int, canary_label: str
) -> Gate:
    """The gate of `pool` from its canaries and how many of its other `nodes` run each stack
    (`rest`, no zero counts): the pool's size is only counted."""
    canaries = tuple(sorted(canaries, key=lambda m: m.name))
    most = max(rest.values(), default=0)
    leaders = {s for s, n in rest.items() if n == most}
    pool_stack = next(iter(leaders)) if len(leaders) == 1 else None
    stacks = {m.stack for m in canaries}
    stack = next(iter(stacks)) if len(stacks) == 1 else None
    reasons: list[str] = []
    if not canaries:
        reasons.append(f"no canary nodes: label some of the pool's Nodes {canary_label}")
    elif stack is None and len(stacks) > 1:
        shown = ", ".join(sorted(_short(s) for s in stacks))
        reasons.append(f"the canaries run different stacks: {shown}")
    for m in canaries:
        if not m.connected:
            reasons.append(f"{m.name}: its agent is not reporting")
        if m.stack is None:
            reasons.append(f"{m.name}: no stack facts yet")
            continue
        new = (rest and m.stack not in leaders) or (
            m.previous is not None and m.previous != m.stack
        )
        if not new:
            reasons.append(
                f"{m.name}: runs the stack {_short(m.stack)} the rest of the pool runs (or no "
                "other node to compare with), and was validated at no other before"
            )
        if m.validated != m.stack:
            reasons.append(f"{m.name}: not validated at its stack {_short(m.stack)}")
        reasons.extend(
            f"{m.name}: open {f.severity} {f.kind} finding {f.component}" for f in m.blocking
        )
    return Gate(pool, not reasons, tuple(reasons), canaries, stack, pool_stack, nodes)


class _Pool:
    """A pool's members as all() last saw them, with the stacks of those that are no
    canary counted as members come and go: deciding its gate again after a node changed
    costs its canaries and its distinct stacks, not its size (every /metrics scrape
    decides the pools of the nodes touched since the one before)."""

    __slots__ = ("canaries", "members", "rest")

    def __init__(self) -> None:
        self.members: dict[str, Member] = {}
        self.canaries: dict[str, Member] = {}
        self.rest: Counter[str] = Counter()

    def add(self, member: Member) -> None:
        self.members[member.name] = member
        if member.canary:
            self.canaries[member.name] = member
        elif member.stack is not None:
            self.rest[member.stack] += 1

    def remove(self, name: str) -> None:
        member = self.members.pop(name)
        if member.canary:
            del self.canaries[name]
        elif member.stack is not None:
            self.rest[member.stack] -= 1
            if not self.rest[member.stack]:
                del self.rest[member.stack]

    def decide(self, pool: str, canary_label: str) -> Gate:
        return _verdict(pool, self.canaries.values(), self.rest, len(self.members), canary_label)


class Gates:
    """Every pool's gate, from the live state, drift findings and validation results."""

    def __init__(
        self,
        state: LiveState,
        evaluator: Evaluator,
        stacks: ValidatedStacks,
        latest: LatestResults,
        settings: GateSettings,
    ):
        self._state = state
        self._evaluator = evaluator
        self._stacks = stacks
        self._latest = latest
        self._settings = settings
        # all() decides again only the pools whose nodes changed (`touched`) since it last
        # ran, or every pool once a validation run is recorded: a scrape costs what changed.
        self._version: int | None = None  # stacks.version all() last ran at; None: never
        self._touched: set[str] = set()
        self._pools: dict[str, _Pool] = {}
        self._pool_of: dict[str, str] = {}
        self._gates: dict[str, Gate] = {}

    def pools(self) -> list[str]:
        """The pools that have nodes, by name."""
        return sorted(p for p, names in self._evaluator.pools.items() if names)

    def gate(self, pool: str) -> Gate:
        """The gate of `pool`; NotFound for a pool with no nodes."""
        names = self._evaluator.pools.get(pool)
        if not names:
            known = self.pools()
            raise NotFound(
                f"no pool {pool!r}",
                hint=f"pools: {', '.join(known[:10])}" if known else "no node has reported yet",
            )
        return self._decide(pool, names, cache(self._latest))

    def touched(self, name: str) -> None:
        """Node `name` changed (facts, connection, findings, pool, or it is gone): all()
        decides its pool again, and the one it left."""
        self._touched.add(name)

    def all(self) -> list[Gate]:
        """Every pool's gate; decided again only where something changed since last time."""
        if self._version != self._stacks.version:
            self._version = self._stacks.version
            self._pools, self._pool_of, self._gates = {}, {}, {}
            self._touched = {name for names in self._evaluator.pools.values() for name in names}
        if self._touched:
            # Walking every result is only needed for a canary's validated stack.
            latest, stale = cache(self._latest), set()
            for name in self._touched:
                left = self._pool_of.pop(name, None)
                if left is not None:
                    self._pools[left].remove(name)
                    stale.add(left)
                pool = self._evaluator.pool_of(name)
                member = None if pool is None else self._member(name, latest)
                if pool is not None and member is not None:
                    self._pools.setdefault(pool, _Pool()).add(member)
                    self._pool_of[name] = pool
                    stale.add(pool)
            self._touched.clear()
            for pool in stale:
                held = self._pools.get(pool)
                if held is not None and held.members:
                    self._gates[pool] = held.decide(pool, self._settings.canary_label)
                else:
                    self._pools.pop(pool, None)
                    self._gates.pop(pool, None)
        return [self._gates[pool] for pool in sorted(self._gates)]

    def _decide(self, pool: str, names: Iterable[str], latest: LatestResults) -> Gate:
        members = (self._member(name, latest) for name in names)
        return decide(pool, (m for m in members if m is not None), self._settings.canary_label)

    def _member(self, name: str, latest: LatestResults) -> Member | None:
        """Node `name` as its pool's gate sees it (`latest` is read for a canary only);
        None when it is gone."""
        node = self._state.get(name)
        if node is None:
            return None
        s = self._settings
        canary = node.value(CANARY_FACT) is True
        return Member(
            name,
            canary,
            node.connected,
            node.stack_hash or None,
            validated_stack(node, latest().get(name, ())) if canary else None,
            self._stacks.previous(name),
            tuple(
                f
                for f in self._evaluator.drift.open_findings(name)
                if f.kind in s.blocking_kinds and f.severity in s.blocking_severities
            )
            if canary
            else (),
        )
