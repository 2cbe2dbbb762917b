"""What a check gets (CheckContext) and what it returns (Outcome)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from plumb.facts import Reading

Status = Literal["pass", "fail", "warn", "skip", "error"]


@dataclass(frozen=True)
class Outcome:
    """One check's result as the node sees it: a status, why, and what it measured."""

    status: Status
    message: str
    value: float | None = None
    unit: str = ""
    details: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def skip(cls, reason: str, **details: str) -> Outcome:
        return cls("skip", reason, details=details)


def _no_figures() -> Mapping[str, float]:
    return {}


@dataclass(frozen=True)
class CheckContext:
    """Where checks read the node from: the same sources the fact collectors use."""

    collect: Callable[[], dict[str, Reading]]  # the node's flat facts, collected now
    # The NVML to use now: the pynvml module, or the FakeNvml of the simulated node's current
    # profile (a new one after each edit), so a check asks once and keeps it for its calls.
    nvml: Callable[[], Any]
    pci_gpu_count: Callable[[], int | None]  # NVIDIA display/3D controllers on the PCI bus
    simulated: bool = False
    # Simulation only: what the profile says this node's benchmarks measure (check id -> value).
    simulated_figures: Callable[[], Mapping[str, float]] = _no_figures
    now: Callable[[], float] = time.time  # Unix seconds, the clock XID times are read by
