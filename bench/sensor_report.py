"""What one SensorReport costs the aggregator: decoding it, keeping it, rendering its gauges.

Builds one dgx-h100 node (8 GPUs) from the agent's collectors on the simulated node, as
fleet.py does, and feeds it reports in which 30 % of its GPUs (`--churn`) are 1 °C warmer
every other report, as `fleet.py --sensor-churn 0.3` sends them; `--moving` names the
readings that move (a busy GPU's power, clocks, utilisation and memory move together), and
`--changes` sends only what moved after the first report, as an agent does to an aggregator
that takes that. Each report goes the way the servicer takes one: `ConnectRequest` parsed
from its bytes, `limits.check_sensors`, the node's readings replaced, then what the intake
tells (`MetricsPage.sensed`). The process CPU time per report is the figure, the median of
`--repeat` passes over the reports (this machine's timing moves by a third from pass to
pass), with the decode's share (parse and checks) apart; `--profile` prints cProfile's top
functions.

`--before FILE` measures a former metrics/sensors.py instead (e.g. `git show
e8c8a2a:aggregator/metrics/sensors.py > /tmp/old.py`), with what a report touched then: that
module's SensorSeries, the node's /metrics lines and its list row.

    .venv/bin/python bench/sensor_report.py [--before /tmp/old.py]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import random
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from harness import write_result
from prometheus_client import CollectorRegistry

from plumb.agent.collect import collect_all, sensors
from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.profile import profile_path
from plumb.aggregator.api.models import NodeOut
from plumb.aggregator.core import NodeRows
from plumb.aggregator.drift import DriftEngine
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.ingest import limits
from plumb.aggregator.metrics.collectors import MetricsPage
from plumb.aggregator.metrics.nodes import NodeSeries
from plumb.aggregator.metrics.sensors import SensorSeries
from plumb.aggregator.recipes import ResolutionCache, load_catalog
from plumb.aggregator.settings import IngestSettings, RecipeSettings
from plumb.aggregator.state.live import LiveState, Sensors, utcnow
from plumb.aggregator.state.replicas import Membership
from plumb.facts import content_hash
from plumb.sensors import changes_proto, to_proto
from plumb.v1 import agent_pb2

# How far each reading `--moving` may name moves every other report, in GpuSensors units.
STEPS = {
    "temperature_celsius": 1,
    "power_draw_watts": 1.0,
    "sm_clock_mhz": 15,
    "memory_clock_mhz": 1,
    "gpu_utilization_ratio": 0.01,
    "memory_utilization_ratio": 0.01,
    "memory_used_bytes": 1 << 20,
}


def _reports(
    n: int, churn: float, fields: list[str], changes: bool, work: Path
) -> tuple[dict, list[bytes]]:
    """The node's facts, and `n` serialized ConnectRequests carrying its readings: each
    whole, or after the first only what moved (`changes`)."""
    sources = Simulation(str(profile_path("dgx-h100")), "n", work).sources()
    facts, readings = collect_all(sources), sensors.read(sources)
    rng = random.Random(1)
    moving = {g.index for g in readings if rng.random() < churn}
    out, last = [], None
    for i in range(n):
        gpus = [
            g._replace(
                **{
                    f: getattr(g, f) + STEPS[f] * (i % 2)
                    for f in fields
                    if getattr(g, f) is not None
                }
            )
            if g.index in moving
            else g
            for g in readings
        ]
        report = changes_proto(gpus, last) if changes and last is not None else to_proto(gpus)
        out.append(agent_pb2.ConnectRequest(sensors=report).SerializeToString())
        last = gpus
    return facts, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reports", type=int, default=20000)
    p.add_argument("--churn", type=float, default=0.3)
    p.add_argument(
        "--moving",
        default="temperature_celsius",
        help=f"the readings that move on a moving GPU, comma-separated, of: {', '.join(STEPS)}",
    )
    p.add_argument(
        "--changes",
        action="store_true",
        help="after the first, reports carry only what moved (SensorReport.changes_only)",
    )
    p.add_argument("--repeat", type=int, default=5, help="passes over the reports")
    p.add_argument(
        "--first",
        type=int,
        default=2000,
        help="nodes whose first (whole) report is rendered new, as a restart's resync does",
    )
    p.add_argument("--before", type=Path, help="a former metrics/sensors.py to measure")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--name", default=None, help="result file name (default: none written)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        fields = args.moving.split(",")
        if unknown := set(fields) - STEPS.keys():
            p.error(f"--moving: no such reading {sorted(unknown)}; pick from {', '.join(STEPS)}")
        facts, reports = _reports(args.reports, args.churn, fields, args.changes, Path(tmp))
    catalog = load_catalog()
    state = LiveState()
    node = state.node("n1", utcnow())
    node.facts = node.reported = facts
    node.content_hash = content_hash(facts)
    node.connected, node.last_report_at, node.session_id = True, utcnow(), "s1"
    evaluator = Evaluator(
        state,
        ResolutionCache(catalog),
        RecipeSettings(),
        DriftEngine(catalog.drift, utcnow, xids=catalog.xids),
    )
    evaluator.node_changed(node)
    membership = Membership("r1", tailing=False)
    nodes = NodeSeries(state, evaluator, membership)
    series_kind = SensorSeries
    if args.before:
        spec = importlib.util.spec_from_file_location("sensors_before", args.before)
        old = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(old)  # type: ignore[union-attr]
        series_kind = old.SensorSeries
        series = series_kind(state, membership)
        rows = NodeRows(state, evaluator, lambda o: NodeOut.of(o).model_dump(mode="json"))

        def told(name: str) -> None:  # the intake touched everything the node shows
            nodes.touched(name)
            series.touched(name)
            rows.touched(name)
    else:
        told = MetricsPage(CollectorRegistry(), nodes, SensorSeries(state, membership)).sensed
    settings = IngestSettings()

    def run() -> float:
        """One pass over the reports; the CPU seconds of their decoding."""
        decoding, gpus = 0.0, None
        for raw in reports:
            start = time.process_time()
            msg = agent_pb2.ConnectRequest.FromString(raw)
            gpus = limits.check_sensors(msg.sensors, 0, settings, gpus)
            decoding += time.process_time() - start
            node.sensors = Sensors(utcnow(), gpus)
            told("n1")
        return decoding

    profiler = cProfile.Profile() if args.profile else None
    passes, decodes = [], []
    for _ in range(args.repeat):
        cpu = time.process_time()
        decodes.append(profiler.runcall(run) if profiler else run())
        passes.append(time.process_time() - cpu)
    first_us, first_kib = _first_reports(args.first, facts, reports[0], series_kind, settings)
    per_us = [cpu / len(reports) * 1e6 for cpu in passes]
    decode_us = [cpu / len(reports) * 1e6 for cpu in decodes]
    result = {
        "code": str(args.before) if args.before else "this tree",
        "reports": len(reports),
        "churn": args.churn,
        "moving": fields,
        "changes_only": args.changes,
        "cpu_us_per_report": round(statistics.median(per_us), 1),
        "decode_us_per_report": round(statistics.median(decode_us), 1),
        "passes_us_per_report": [round(us, 1) for us in per_us],
        "passes_decode_us_per_report": [round(us, 1) for us in decode_us],
        "cores_at_10000_nodes_every_15_s": round(statistics.median(per_us) * 1e-6 * 10000 / 15, 3),
        "first_report_nodes": args.first,
        "first_report_cpu_us_per_node": round(first_us, 1),
        "first_report_kib_kept_per_node": round(first_kib, 2),
    }
    print(result)
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(18)
    if args.name:
        write_result(args.name, result)


def _first_reports(
    n: int, facts: dict, raw: bytes, series_kind: type, settings: IngestSettings
) -> tuple[float, float]:
    """The CPU (us) and the memory kept (KiB, tracemalloc's, the decoded readings
    included) per node for `n` nodes new to a sensor series, each sent the whole report
    `raw`: what every stream's first report costs after a restart. Median CPU of 3
    passes, each on a series and nodes of its own."""
    cpu, kept = [], 0.0
    for measured in range(4):  # the last pass only weighs the memory
        state = LiveState()
        series = series_kind(state, Membership("r1", tailing=False))
        names = [f"first-{i:05d}" for i in range(n)]
        for name in names:
            node = state.node(name, utcnow())
            node.facts = node.reported = facts
        traced = measured == 3
        if traced:
            tracemalloc.start()
        start = time.process_time()
        for name in names:
            msg = agent_pb2.ConnectRequest.FromString(raw)
            state.get(name).sensors = Sensors(
                utcnow(), limits.check_sensors(msg.sensors, 0, settings, None)
            )
            series.touched(name)
        took = time.process_time() - start
        if traced:
            kept = tracemalloc.get_traced_memory()[0] / n / 1024
            tracemalloc.stop()
        else:
            cpu.append(took / n * 1e6)
    return statistics.median(cpu), kept


if __name__ == "__main__":
    main()
