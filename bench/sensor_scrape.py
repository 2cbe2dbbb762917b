"""What one /metrics/sensors scrape costs the aggregator while the fleet keeps reporting.

The sensor page is joined as it is sent (api/paced.py): a family at a time, a slice of
nodes at a time. While it goes out, sensor reports keep arriving, and each one changes its
node's slice. Builds the real sensor series (`SensorSeries`) of N simulated dgx-h100 nodes,
as metrics_gzip.py does, then takes the page piece by piece, as a scrape does; between two
pieces it applies the reports that would arrive while the piece before was sent: `--rate`
reports a second (default: every node once per 30 s, the agents' sensor interval), the page
going out at `--send-mb-s` (default 120: 56 MB in 470 ms, round 51's 10,000-node scrape).
Each report moves the temperature of 30 % of a random node's GPUs by 1 degree, as
`fleet.py --sensor-churn 0.3` does.

The figures are the CPU this thread spends producing the pieces (the joins), per scrape,
median of `--runs`, against the join of the whole page with nothing moving during it; and
the longest piece's, a step of the aggregator's event loop that every stream waits behind.

    .venv/bin/python bench/sensor_scrape.py --nodes 10000 --runs 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from harness import write_result
from metrics_gzip import fleet
from nodes import Profile

from plumb.aggregator.metrics.sensors import SensorSeries
from plumb.aggregator.state.live import LiveState, Sensors


def report(state: LiveState, sensors: SensorSeries, rng: random.Random, n: int) -> None:
    """One random node's report: 30 % of its GPUs 1 degree warmer or cooler."""
    node = state.get(f"gpu-{rng.randrange(n):05d}")
    gpus = tuple(
        g._replace(temperature_celsius=g.temperature_celsius + rng.choice((-1, 1)))
        if rng.random() < 0.3
        else g
        for g in node.sensors.gpus
    )
    node.sensors = Sensors(node.sensors.at, gpus)
    sensors.touched(node.name)


def scrape(
    state: LiveState, sensors: SensorSeries, rng: random.Random, n: int, per_byte: float
) -> tuple[float, float, int, int]:
    """One scrape with reports arriving between its pieces, `per_byte` per byte sent: the
    CPU seconds spent producing the pieces and the longest one's (a step of the event loop
    in the aggregator), the bytes, and the reports applied."""
    spent, longest, size, due, applied = 0.0, 0.0, 0, 0.0, 0
    pieces = sensors.pieces()
    while True:
        t = time.thread_time()
        piece = next(pieces, None)
        took = time.thread_time() - t
        spent, longest = spent + took, max(longest, took)
        if piece is None:
            return spent, longest, size, applied
        size += len(piece)
        due += len(piece) * per_byte
        while due >= 1:
            report(state, sensors, rng, n)
            due -= 1
            applied += 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rate", type=float, help="reports a second (default: nodes / 30)")
    p.add_argument("--send-mb-s", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default=None, help="result name (default sensor_scrape_N)")
    args = p.parse_args()
    rate = args.rate if args.rate is not None else args.nodes / 30
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        profile = Profile.collect("dgx-h100", Path(tmp))
    state, sensors = fleet(args.nodes, profile, rng)
    per_byte = rate / (args.send_mb_s * 1e6)
    quiet, moving, longest, applied = [], [], [], []
    for _ in range(args.runs):
        for _ in range(args.nodes // 3):  # what moved since the last scrape: rejoin it all
            report(state, sensors, rng, args.nodes)
        quiet.append(scrape(state, sensors, rng, args.nodes, 0.0)[0])
        for _ in range(args.nodes // 3):
            report(state, sensors, rng, args.nodes)
        spent, most, size, count = scrape(state, sensors, rng, args.nodes, per_byte)
        moving.append(spent)
        longest.append(most)
        applied.append(count)

    def ms(xs: list[float]) -> float:
        return round(statistics.median(xs) * 1e3, 1)

    result = {
        "benchmark": "sensor_scrape",
        "nodes": args.nodes,
        "runs": args.runs,
        "reports_per_s": rate,
        "send_mb_s": args.send_mb_s,
        "page_bytes": size,
        "note": "CPU of producing the page's pieces, median of runs",
        "join_cpu_ms_nothing_moving": ms(quiet),
        "join_cpu_ms_reports_arriving": ms(moving),
        "join_cpu_ms_reports_arriving_runs": [round(x * 1e3, 1) for x in moving],
        "longest_piece_cpu_ms": ms(longest),
        "reports_during_scrape": statistics.median(applied),
    }
    print(write_result(args.name or f"sensor_scrape_{args.nodes}", result))


if __name__ == "__main__":
    main()
