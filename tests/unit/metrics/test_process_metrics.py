"""process_* series: the families prometheus_client's ProcessCollector exports, with the open
descriptors counted without listing /proc/self/fd."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, ProcessCollector

from plumb.aggregator.metrics.collectors import ProcessMetrics


def _families(collector) -> dict:
    return {f.name: f for f in collector.collect()}


def test_the_families_are_prometheus_client_s_own():
    ours = _families(ProcessMetrics(CollectorRegistry()))
    theirs = _families(ProcessCollector(registry=None))
    assert {n: (f.type, f.documentation) for n, f in ours.items()} == {
        n: (f.type, f.documentation) for n, f in theirs.items()
    }
    for name in ("process_start_time_seconds", "process_max_fds"):
        assert ours[name].samples[0].value == theirs[name].samples[0].value, name


def test_open_descriptors_follow_the_ones_opened_and_closed():
    metrics = ProcessMetrics(CollectorRegistry())

    def open_fds() -> float:
        return _families(metrics)["process_open_fds"].samples[0].value

    before = open_fds()
    pipes = [os.pipe() for _ in range(50)]  # two descriptors each
    try:
        assert open_fds() == before + 100
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)
    assert open_fds() == before
