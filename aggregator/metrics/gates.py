"""`plumb_gate_open{pool}`: each pool's rollout gate (aggregator/gates.py) as a gauge, so an
alert or a controller reading Prometheus sees what `GET /v1/gates/{pool}` answers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["GateCollector"]

# (pool, open) for every pool with nodes.
GateStates = Callable[[], Iterable[tuple[str, bool]]]


class GateCollector(Collector):
    """One series per pool: 1 while its gate is open, 0 while closed."""

    def __init__(self, registry: CollectorRegistry, gates: GateStates):
        self._gates = gates
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        yield _family()  # registering reads this, not the gates (their inputs may be empty)

    def collect(self) -> Iterator[Metric]:
        fam = _family()
        for pool, is_open in self._gates():
            fam.add_metric([pool], 1.0 if is_open else 0.0)
        yield fam


def _family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "plumb_gate_open",
        "1 while the pool's rollout gate is open: its canaries run a new stack, passed "
        "validation at it and match their twins; else 0 (GET /v1/gates/{pool} says why).",
        labels=["pool"],
    )
