"""The fleet's change timeline: fact changes across nodes grouped into events.

One event is one transition of one fact (the GPU index folded, so eight GPUs flashing a VBIOS
are one change of their node) within one pool, over the nodes that made it with no quiet gap
longer than `gap` between them: "NCCL 2.27.7 → 2.28.3 on 12 of 16 nodes of eks/h100/ubuntu,
03:10–03:14". Each event carries the findings that opened or closed on its nodes during it and
the validation runs that ran in its window, so "what changed, and what did it do?" is one read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.store import HistoryEntry
from plumb.aggregator.validation import ValidationRun
from plumb.facts import Reading, unindexed

__all__ = ["ChangeEvent", "fact_like", "group_changes"]

# Findings open in the same transaction as the change; a re-evaluation may trail it a little.
_SETTLE = timedelta(seconds=60)


@dataclass(frozen=True)
class ChangeEvent:
    """One fact moving from `old` to `new` on `nodes` of `pool`, `started_at`–`ended_at`."""

    fact: str  # the path, GPU indexes as [*]
    old: str | None  # the value as shown (a status where not ok); None: the fact appeared
    new: str | None  # None: the fact went away
    pool: str | None  # None: nodes no longer known (removed)
    nodes: tuple[str, ...]
    pool_nodes: int | None  # how many nodes the pool has now
    started_at: datetime
    ended_at: datetime
    opened: tuple[DriftFinding, ...]
    closed: tuple[DriftFinding, ...]
    validations: tuple[ValidationRun, ...]

    @property
    def summary(self) -> str:
        """One line an SRE reads: what moved, where, when."""
        move = f"{self.old or '(none)'} → {self.new or '(none)'}"
        n = len(self.nodes)
        if self.pool is not None and self.pool_nodes:
            where = f"{n} of {self.pool_nodes} node{'s' if self.pool_nodes != 1 else ''}"
            where += f" of {self.pool}"
        else:
            where = f"{n} node{'s' if n != 1 else ''}"
        when = f"{self.started_at:%Y-%m-%d %H:%M}"
        if self.ended_at - self.started_at >= timedelta(minutes=1):
            when += f"–{self.ended_at:%H:%M}"
        return f"{self.fact} {move} on {where}, {when}"


def fact_like(fact: str) -> str:
    """The SQL LIKE pattern (backslash escapes) matching `fact` and what lies under it;
    `[*]` in `fact` matches any GPU or library index."""
    escaped = fact.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("[*]", "[%]") + "%"


def group_changes(
    changes: Iterable[tuple[str, HistoryEntry]],
    pools: Mapping[str, str],
    pool_sizes: Mapping[str, int],
    findings: Sequence[DriftFinding],
    runs: Sequence[ValidationRun],
    *,
    gap: timedelta,
) -> list[ChangeEvent]:
    """Events from per-node changes (in any order), newest first."""
    # (fact, old, new, pool) -> node -> when it changed (first and last row: several GPUs).
    moves: dict[tuple, dict[str, list[datetime]]] = defaultdict(dict)
    for node, entry in changes:
        key = (unindexed(entry.path).replace("[]", "[*]"), _shown(entry.old), _shown(entry.new))
        times = moves[(*key, pools.get(node))].setdefault(node, [entry.at, entry.at])
        times[0], times[1] = min(times[0], entry.at), max(times[1], entry.at)
    events = []
    for (fact, old, new, pool), by_node in moves.items():
        for nodes in _waves(by_node, gap):
            start = min(by_node[n][0] for n in nodes)
            end = max(by_node[n][1] for n in nodes)
            events.append(
                _event(fact, old, new, pool, nodes, pool_sizes, start, end, findings, runs, gap)
            )
    events.sort(key=lambda e: (e.started_at, e.fact, e.pool or ""), reverse=True)
    return events


def _waves(by_node: Mapping[str, list[datetime]], gap: timedelta) -> list[tuple[str, ...]]:
    """The nodes split where more than `gap` passes with none of them changing."""
    order = sorted(by_node, key=lambda n: (by_node[n][0], n))
    waves: list[list[str]] = []
    last_end: datetime | None = None
    for n in order:
        first, last = by_node[n]
        if last_end is None or first - last_end > gap:
            waves.append([])
        waves[-1].append(n)
        last_end = last if last_end is None else max(last_end, last)
    return [tuple(sorted(w)) for w in waves]


def _event(
    fact: str,
    old: str | None,
    new: str | None,
    pool: str | None,
    nodes: tuple[str, ...],
    pool_sizes: Mapping[str, int],
    start: datetime,
    end: datetime,
    findings: Sequence[DriftFinding],
    runs: Sequence[ValidationRun],
    gap: timedelta,
) -> ChangeEvent:
    members = set(nodes)
    until = end + _SETTLE

    def during(t: datetime | None) -> bool:
        return t is not None and start <= t <= until

    ran = tuple(
        r
        for r in runs
        if members & set(r.nodes)
        and r.created_at <= end + gap
        and (r.finished_at is None or r.finished_at >= start)
    )
    return ChangeEvent(
        fact=fact,
        old=old,
        new=new,
        pool=pool,
        nodes=nodes,
        pool_nodes=pool_sizes.get(pool) if pool is not None else None,
        started_at=start,
        ended_at=end,
        opened=tuple(f for f in findings if f.node in members and during(f.opened_at)),
        closed=tuple(f for f in findings if f.node in members and during(f.closed_at)),
        validations=ran,
    )


def _shown(reading: Reading | None) -> str | None:
    """A reading as the timeline shows it: its value, else its status."""
    if reading is None:
        return None
    if reading.status != "ok":
        return reading.status
    value = reading.value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
