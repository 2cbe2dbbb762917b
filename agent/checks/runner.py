"""Runs the checks of one RunChecks request, one after another, each off the event loop.

Checks block (NVML, CUDA, subprocesses), so each runs in a thread under its timeout. A
thread cannot be killed: a check that overruns is reported as `error` and, while its thread
is still running, later checks of the node are skipped as `busy` rather than measured on a
GPU that an abandoned benchmark still holds.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from plumb.agent.checks.conformance import CONFORMANCE
from plumb.agent.checks.model import CheckContext, Outcome
from plumb.agent.checks.params import refused, timeout_refused
from plumb.agent.checks.performance import PERFORMANCE

__all__ = ["CHECKS", "CheckRunner", "Timed"]

log = logging.getLogger(__name__)

Check = Callable[[CheckContext, Mapping[str, str]], Outcome]
CHECKS: dict[str, Check] = {**CONFORMANCE, **PERFORMANCE}

# When the aggregator gives no timeout (an older aggregator sending only ids).
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Timed:
    """A check's outcome and how long it took."""

    check_id: str
    outcome: Outcome
    duration_s: float


class CheckRunner:
    """Runs checks against one node's context."""

    def __init__(self, ctx: CheckContext):
        self._ctx = ctx
        self._abandoned: set[asyncio.Future] = set()

    def request_context(self) -> CheckContext:
        """The context for one request's checks: facts collected once, on first use, so
        six conformance checks cost one NVML pass."""
        return replace(self._ctx, collect=_once(self._ctx.collect))

    async def run(
        self,
        check_id: str,
        params: Mapping[str, str],
        timeout_s: float | None,
        ctx: CheckContext | None = None,
    ) -> Timed:
        """One check under its timeout; never raises. No timeout (None, or proto3's unset 0)
        means DEFAULT_TIMEOUT_S; one out of range refuses the check with `error`."""
        start = time.monotonic()
        check = CHECKS.get(check_id)
        if check is None:
            return Timed(check_id, Outcome.skip(f"unknown to this agent ({check_id})"), 0.0)
        if not timeout_s:
            timeout_s = DEFAULT_TIMEOUT_S
        why = timeout_refused(timeout_s) or refused(check_id, params)
        if why is not None:
            log.warning("check refused", extra={"check": check_id, "reason": why})
            return Timed(check_id, Outcome("error", f"refused: {why}"), 0.0)
        self._abandoned = {f for f in self._abandoned if not f.done()}
        if self._abandoned:
            outcome = Outcome.skip("busy", why="an earlier check that timed out still runs")
            return Timed(check_id, outcome, 0.0)
        work = asyncio.ensure_future(asyncio.to_thread(check, ctx or self._ctx, params))
        try:
            outcome = await asyncio.wait_for(asyncio.shield(work), timeout=timeout_s)
        except TimeoutError:
            self._abandoned.add(work)
            work.add_done_callback(_consume)
            outcome = Outcome("error", f"no result within its {timeout_s:g} s timeout")
        except Exception as exc:  # a check's own bug is its result, never the stream's end
            log.warning("check failed", extra={"check": check_id, "error": str(exc)})
            outcome = Outcome("error", f"{type(exc).__name__}: {exc}")
        return Timed(check_id, outcome, time.monotonic() - start)


def _once(collect: Callable[[], dict]) -> Callable[[], dict]:
    lock, held = threading.Lock(), []

    def cached() -> dict:
        with lock:
            if not held:
                held.append(collect())
            return held[0]

    return cached


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()  # retrieved, so asyncio does not log it as never retrieved
