"""What a gzip /metrics costs the aggregator, and why the sensor page stays plain text.

Builds the real per-node series (`NodeSeries`, `SensorSeries`) of N simulated dgx-h100 nodes,
each with its own hostname and GPU UUIDs (bench/nodes.py) and its own readings, in this
process: no gRPC, no HTTP, no evaluator (no findings or recipe lines). Then, in CPU seconds
of this process (the deflating worker thread included), median of --runs:

- the /metrics node families' bytes, plain and gzip-encoded, and every piece of them
  deflated at zlib's level 1 (the aggregator's) against level 6 (gzip's default);
- a gzip render the first time (every slice deflated), with nothing changed, after one node's
  driver changed, and after `--heartbeats` nodes' report times moved (a scrape's share of
  the heartbeats between two back-to-back scrapes);
- the sensor page: its bytes, the CPU of deflating it whole (its slices all move between two
  scrapes, as every node reports on its interval) against sending it over a loopback TCP
  socket, both ends' CPU counted.

    .venv/bin/python bench/metrics_gzip.py --nodes 10000 --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import statistics
import tempfile
import threading
import time
import zlib
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from harness import write_result
from nodes import Profile

from plumb import facts as wire
from plumb.aggregator.metrics.nodes import NodeSeries
from plumb.aggregator.metrics.packed import gzip_stream, pack
from plumb.aggregator.metrics.sensors import SensorSeries
from plumb.aggregator.state.live import LiveState, Sensors
from plumb.aggregator.state.replicas import Membership

AT = datetime(2026, 12, 1, tzinfo=UTC)


MEMBERSHIP = Membership("bench", tailing=False)
# What NodeSeries reads of the evaluator: no recipes, no open findings.
EVALUATOR = SimpleNamespace(resolutions={}, drift=SimpleNamespace(open_findings=lambda _: []))


def node_series(state: LiveState) -> NodeSeries:
    """The /metrics node families of every node in `state`, rendered anew."""
    nodes = NodeSeries(state, EVALUATOR, MEMBERSHIP)
    for node in state.nodes():
        nodes.touched(node.name)
    return nodes


def fleet(n: int, profile: Profile, rng: random.Random) -> tuple[LiveState, SensorSeries]:
    """N connected nodes of `profile`, each with its own values and readings; their sensor
    page rendered."""
    state = LiveState()
    sensors = SensorSeries(state, MEMBERSHIP)
    for i in range(n):
        name = f"gpu-{i:05d}"
        node = state.node(name, AT)
        node.facts = node.reported = profile.node_facts(name)
        node.content_hash = wire.content_hash(node.facts)
        node.connected = True
        node.last_report_at = AT + timedelta(seconds=rng.uniform(0, 30))
        gpus = tuple(
            g._replace(
                temperature_celsius=rng.randint(30, 80),
                power_draw_watts=round(rng.uniform(60, 700), 1),
                gpu_utilization_ratio=round(rng.random(), 2),
            )
            for g in profile.readings
        )
        node.sensors = Sensors(node.last_report_at, gpus)
        sensors.touched(name)
    return state, sensors


async def gzip_page(nodes: NodeSeries) -> bytes:
    return b"".join(gzip_stream(await nodes.packed()))


async def cpu(work: Awaitable) -> float:
    """CPU seconds of this process (its threads included) while `work` runs."""
    t = time.process_time()
    await work
    return time.process_time() - t


def loopback_send_cpu(data: bytes) -> float:
    """CPU seconds of this process sending `data` over loopback TCP and reading it back."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        with client, peer:

            def read() -> None:
                left = len(data)
                while left:
                    left -= len(peer.recv(1 << 20))

            reader = threading.Thread(target=read)
            t = time.process_time()
            reader.start()
            client.sendall(data)
            reader.join()
            return time.process_time() - t


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--heartbeats", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        profile = Profile.collect("dgx-h100", Path(tmp))
    state, sensors = fleet(args.nodes, profile, rng)
    plain_pieces = node_series(state).render()
    plain = b"".join(plain_pieces)
    runs: dict[str, list[float]] = {"first": [], "unchanged": [], "driver": [], "heartbeats": []}
    for _ in range(args.runs):
        nodes = node_series(state)  # nothing deflated yet, as after a start
        runs["first"].append(await cpu(gzip_page(nodes)))
        runs["unchanged"].append(await cpu(gzip_page(nodes)))
        node = state.get(f"gpu-{rng.randrange(args.nodes):05d}")
        version = f"590.{rng.randrange(1000)}.01"
        node.facts = {**node.facts, "driver.driver_version": wire.Reading.ok(version)}
        nodes.touched(node.name)
        runs["driver"].append(await cpu(gzip_page(nodes)))
        for i in rng.sample(range(args.nodes), args.heartbeats):
            moved = state.get(f"gpu-{i:05d}")
            moved.last_report_at += timedelta(seconds=30)
            nodes.seen(moved.name)
        runs["heartbeats"].append(await cpu(gzip_page(nodes)))
    gzipped = await gzip_page(nodes)
    levels = {}
    for level in (1, 6):
        t = time.process_time()
        size = sum(len(zlib.compress(x, level, wbits=-zlib.MAX_WBITS)) for x in plain_pieces)
        levels[f"level_{level}"] = {
            "bytes": size,
            "cpu_ms": round((time.process_time() - t) * 1e3, 1),
        }
    sensor_page = b"".join(sensors.pieces())
    deflate_s = [
        await cpu(asyncio.to_thread(lambda: [pack(x) for x in sensors.pieces()]))
        for _ in range(args.runs)
    ]
    send_s = [loopback_send_cpu(sensor_page) for _ in range(args.runs)]
    deflated = sum(len(pack(x).data) for x in sensors.pieces())

    def ms(xs: list[float]) -> float:
        return round(statistics.median(xs) * 1e3, 2)

    result = {
        "benchmark": "metrics_gzip",
        "nodes": args.nodes,
        "runs": args.runs,
        "note": "CPU of this process, median of runs; no evaluator, so no findings or recipe "
        "lines on the page",
        "metrics_node_families": {
            "plain_bytes": len(plain),
            "gzip_bytes": len(gzipped),
            "every_piece_deflated": levels,
            "render_gzip_cpu_ms": {
                "first_every_slice": ms(runs["first"]),
                "nothing_changed": ms(runs["unchanged"]),
                "one_driver_changed": ms(runs["driver"]),
                f"{args.heartbeats}_heartbeats": ms(runs["heartbeats"]),
            },
        },
        "sensor_page": {
            "plain_bytes": len(sensor_page),
            "deflated_bytes": deflated,
            "deflate_whole_cpu_ms": ms(deflate_s),
            "send_over_loopback_cpu_ms": ms(send_s),
        },
    }
    print(write_result(f"metrics_gzip_{args.nodes}", result))


if __name__ == "__main__":
    asyncio.run(main())
