"""No request blocks the others: /healthz and an agent's Hello are answered while a large
snapshot is being rendered.

The fleet is seeded straight into the SQLite file `plumb serve` then opens: one simulated
node's facts through the store's own `apply`, copied in SQL to the other names (writing them
one by one would take a minute). Ordering is by arrival, not time: with the snapshot asked
for, health checks go one after the other, and each must be answered before the snapshot.
"""

from __future__ import annotations

import select
import socket
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from conftest import Aggregator

from plumb.agent.collect import collect_all
from plumb.agent.simulate.node import Simulation
from plumb.aggregator.store import NodeUpdate, Store
from plumb.facts import content_hash
from plumb.v1 import agent_pb2, agent_pb2_grpc

pytestmark = pytest.mark.integration

NODES = 1000  # rendering them takes far longer than a health check, even in a thread
HEALTH_CHECKS = 5


def _seed(workdir: Path, nodes: int) -> None:
    facts = collect_all(Simulation("dgx-h100", "seed", workdir / "sim").sources())
    at = datetime.now(UTC)
    store = Store(f"sqlite:///{workdir / 'plumb.db'}")
    first = "gpu-node-00000"
    store.apply(
        [
            NodeUpdate(
                node=first,
                at=at,
                facts=facts,
                connected=False,
                content_hash=content_hash(facts),
                last_report_at=at,
            )
        ]
    )
    store.close()
    with sqlite3.connect(workdir / "plumb.db") as db:
        names = (
            "WITH RECURSIVE seq(i) AS"
            f" (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < {nodes - 1})"
        )
        for table, key in (("nodes", "name"), ("node_facts", "node")):
            cols = [row[1] for row in db.execute(f"PRAGMA table_info({table})") if row[1] != key]
            db.execute(
                f"{names} INSERT INTO {table} ({key}, {', '.join(cols)})"
                f" SELECT printf('gpu-node-%05d', i), {', '.join(cols)} FROM {table}, seq"
                f" WHERE {key} = ?",
                (first,),
            )


def _connect(agg: Aggregator) -> socket.socket:
    return socket.create_connection(("127.0.0.1", agg.http_port), timeout=120)


def _send(sock: socket.socket, path: str) -> None:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())


def _welcomed(agg: Aggregator) -> bool:
    """Open an agent stream, send Hello and wait for the aggregator's Welcome."""
    stop = threading.Event()

    def requests():
        yield agent_pb2.ConnectRequest(
            hello=agent_pb2.Hello(node_name="late-agent", agent_version="t", boot_id="b")
        )
        stop.wait(120)

    with grpc.insecure_channel(agg.grpc) as channel:
        replies = agent_pb2_grpc.AgentServiceStub(channel).Connect(requests(), timeout=120)
        try:
            return next(replies).WhichOneof("message") == "welcome"
        finally:
            stop.set()
            replies.cancel()


def _read(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    sock.close()
    return b"".join(chunks)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aggregator]:
    workdir = tmp_path_factory.mktemp("fleet")
    _seed(workdir, NODES)
    agg = Aggregator(workdir, start_timeout_s=120)
    try:
        yield agg.start()
    finally:
        if agg.proc is not None:
            agg.stop()


@pytest.mark.parametrize("fmt", ["yaml", "aicr", "json"])
def test_health_checks_answer_while_a_large_snapshot_is_rendered(fleet, fmt):
    assert len(fleet.json("/v1/nodes")) == NODES
    snapshot = _connect(fleet)
    _send(snapshot, f"/v1/snapshot?format={fmt}")
    # One after the other, each sent once the last was answered: the first could slip in
    # before the snapshot route starts, the later ones only if it leaves the loop free.
    for i in range(HEALTH_CHECKS):
        health = _connect(fleet)
        _send(health, "/healthz")
        readable, _, _ = select.select([snapshot, health], [], [], 120)
        assert readable == [health], "the snapshot answered first: it held the event loop"
        assert _read(health).startswith(b"HTTP/1.1 200")
        if i == 0:  # an agent's Hello is answered with Welcome meanwhile, too
            assert _welcomed(fleet), "no Welcome"
            assert not select.select([snapshot], [], [], 0)[0], "the snapshot answered first"
    body = _read(snapshot)
    assert body.startswith(b"HTTP/1.1 200")
    assert body.count(b"gpu-node-") >= NODES
