"""The XID events a simulated node's profile schedules, as FakeNvml's event sets deliver them.

One `XidSchedule` lives as long as the simulated node: the profile's `xids` are re-planned on
every reload, times count from the node's start, and each event set delivers each planned XID
once, so editing one into a running node's profile (with a past `after_s`) delivers it at once
while the ones already delivered are not repeated.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from plumb.agent.simulate.profile import XidSpec

__all__ = ["FakeEventSet", "XidSchedule"]


class XidSchedule:
    """The planned XIDs of one simulated node and the clock they are due by."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._changed = threading.Condition()
        self._planned: tuple[XidSpec, ...] = ()

    def plan(self, xids: Sequence[XidSpec]) -> None:
        """The XIDs the profile now schedules (on each load); waiting sets see them at once."""
        with self._changed:
            self._planned = tuple(sorted(xids, key=lambda x: x.after_s))
            self._changed.notify_all()

    def take(self, delivered: Counter, gpus: set[int], timeout_s: float) -> XidSpec | None:
        """The next XID due on one of `gpus` that `delivered` lacks (counted in), waiting up
        to `timeout_s` for one; None when none came."""
        deadline = self._clock() + timeout_s
        with self._changed:
            while True:
                now = self._clock()
                seen: Counter = Counter()
                wait = deadline - now
                for xid in self._planned:
                    seen[xid] += 1
                    if xid.gpu not in gpus or seen[xid] <= delivered[xid]:
                        continue
                    due_in = self._start + xid.after_s - now
                    if due_in <= 0:
                        delivered[xid] += 1
                        return xid
                    wait = min(wait, due_in)
                if wait <= 0:
                    return None
                self._changed.wait(wait)


@dataclass
class FakeEventSet:
    """What nvmlEventSetCreate returns: the GPUs registered on it and what it delivered."""

    schedule: XidSchedule
    gpus: set[int] = field(default_factory=set)
    delivered: Counter = field(default_factory=Counter)
    freed: bool = False
