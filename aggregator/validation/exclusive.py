"""Which nodes' GPUs a GPU-exclusive check holds now, across every run of this aggregator.

A check marked `exclusive: gpus` (recipes/checks/) needs every GPU of its nodes to itself: a
bandwidth measured while another benchmark shares the GPUs measures both, and a workload asking
for all of a node's GPUs waits while another holds them. The orchestrator takes a hold on the
check's nodes (one node for an agent's benchmarks, two for an NCCL pair) before it starts the
check, and gives it back when the check ends. A hold is taken on all its nodes at once or not
at all, so two waiting holds never wait on each other; a waiter is told what holds its nodes
each time that changes, and the run's progress names it (`hold_for`). Holds span runs: two
runs started close together still take turns on a node. `serial_bound_s` is the longest a run
can take with its exclusive work in turn: the default deadline covers it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.validation.model import CLUSTER_WIDE, GpuWait, ValidationRun

__all__ = ["GpuHolds", "Hold", "serial_bound_s"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hold:
    """Checks of one run holding (or waiting for) every GPU of some nodes."""

    run_id: str
    checks: tuple[str, ...]
    nodes: tuple[str, ...]

    def describe(self, run_id: str) -> str:
        """`checks on nodes`, with the holder's run id when it is not `run_id`."""
        text = f"{', '.join(self.checks)} on {', '.join(self.nodes)}"
        return text if run_id == self.run_id else f"{text} (run {self.run_id[:8]})"


class GpuHolds:
    """The holds in force, by node, and the waiters to wake when one ends."""

    def __init__(self) -> None:
        self._held: dict[str, Hold] = {}
        self._wakers: dict[asyncio.Event, None] = {}  # an ordered set: woken in arrival order

    def holders(self, nodes: tuple[str, ...]) -> tuple[Hold, ...]:
        """The holds on any of `nodes`, each once."""
        return tuple(dict.fromkeys(self._held[n] for n in nodes if n in self._held))

    @asynccontextmanager
    async def hold(
        self, hold: Hold, waiting: Callable[[tuple[Hold, ...]], None]
    ) -> AsyncIterator[None]:
        """Hold `hold.nodes` for the block; while any is held, call `waiting` with the holds
        in the way, again whenever they change. Cancelled while waiting, it holds nothing."""
        while blockers := self.holders(hold.nodes):
            waiting(blockers)
            woken = asyncio.Event()
            self._wakers[woken] = None
            try:
                await woken.wait()
            finally:
                del self._wakers[woken]
        for node in hold.nodes:
            self._held[node] = hold
        try:
            yield
        finally:
            for node in hold.nodes:
                del self._held[node]
            for woken in self._wakers:
                woken.set()

    @asynccontextmanager
    async def hold_for(
        self,
        run: ValidationRun,
        target: str,
        checks: tuple[str, ...],
        nodes: tuple[str, ...],
        clock: Callable[[], datetime],
    ) -> AsyncIterator[None]:
        """`hold` for checks of `run` whose results land on `target`: while they wait, the
        run's `waiting` names them and what holds their nodes; once they hold, it does not."""
        hold, key = Hold(run.id, checks, nodes), (target, checks[0])

        def waiting(blockers: tuple[Hold, ...]) -> None:
            held_by = tuple(b.describe(run.id) for b in blockers)
            if key in run.waiting:
                since = run.waiting[key].since
            else:
                since = clock()
                log.info(
                    "waiting for GPUs", extra={"run": run.id, "checks": checks, "held_by": held_by}
                )
            run.waiting[key] = GpuWait(target, checks, nodes, held_by, since)

        async with self.hold(hold, waiting):
            run.waiting.pop(key, None)
            yield


def serial_bound_s(defs: Collection[CheckDef], held: Collection[str], grace_s: float) -> float:
    """How long a run of `defs` takes at most when each uses its whole timeout: a node's shared
    agent checks, then its exclusive ones (each request with its grace), plus the cluster checks
    in `held` one after another (each may wait for a node another holds); shared cluster checks
    run beside all of it, and an exclusive one holding no node skips at once."""

    def budget(ds: list[CheckDef]) -> float:
        return sum(d.timeout_s for d in ds) + grace_s if ds else 0.0

    agent = [d for d in defs if d.runs_on == "agent"]
    nodes_s = budget([d for d in agent if not d.exclusive]) + budget(
        [d for d in agent if d.exclusive]
    )
    held_s = sum(d.timeout_s + grace_s for d in defs if d.id in held)
    beside_s = max(
        (d.timeout_s + grace_s for d in defs if d.runs_on in CLUSTER_WIDE and not d.exclusive),
        default=0.0,
    )
    return max(nodes_s + held_s, beside_s)
