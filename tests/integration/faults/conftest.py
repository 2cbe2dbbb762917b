"""Helpers for the fault tests: an aggregator on any database, a fleet of in-process agents,
a raw stream, and a process's resident memory."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import Aggregator

from plumb import facts as wire
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient
from plumb.v1 import agent_pb2


@dataclass
class DbAggregator(Aggregator):
    """`plumb serve` on the database `database` (a SQLite file in workdir when None)."""

    database: str | None = None

    @property
    def db(self) -> str:
        return self.database or super().db


def rss_kib(pid: int) -> int:
    """Resident memory of process `pid`, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class FakeNode:
    """One simulated node's facts, changed by the test thread, read by its StreamClient."""

    def __init__(self, name: str, facts: dict[str, wire.Reading]) -> None:
        self.name = name
        self.facts = facts
        self.set_at: dict[str, float] = {}

    def set(self, path: str, value: str) -> None:
        self.facts = {**self.facts, path: wire.Reading.ok(value)}  # one atomic rebind

    def collect(self) -> dict[str, wire.Reading]:
        return self.facts


@dataclass
class Fleet:
    """N real StreamClients in one background thread with its own event loop."""

    target: str
    nodes: list[FakeNode]
    settings: StreamSettings
    clients: list[StreamClient] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _stop: asyncio.Event | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Fleet:
        started = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self.clients = [
                StreamClient(self.target, Identity(n.name, "fault-test", n.name), n.collect, s)
                for n, s in ((n, self.settings) for n in self.nodes)
            ]
            tasks = [asyncio.create_task(c.run(self._stop)) for c in self.clients]
            started.set()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def connections(self) -> list[int]:
        return [c.connections for c in self.clients]

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)


@pytest.fixture
def fleet_factory() -> Iterator:
    fleets: list[Fleet] = []

    def make(target: str, nodes: list[FakeNode], **settings: float) -> Fleet:
        fleet = Fleet(target, nodes, StreamSettings(**settings)).start()
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop()


def poll(check, timeout: float, interval: float = 0.1):
    """`check()` until truthy or `timeout` s; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def hello_msg(name: str) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        hello=agent_pb2.Hello(node_name=name, agent_version="test", boot_id="b-1")
    )


def full_msg(flat: dict) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        full_facts=agent_pb2.FullFacts(
            seq=1, content_sha256=wire.content_digest(flat), facts=wire.unflatten(flat)
        )
    )


def delta_msg(seq: int, path: str, reading: wire.Reading, after: dict) -> agent_pb2.ConnectRequest:
    msg = agent_pb2.FactsDelta(seq=seq, content_sha256=wire.content_digest(after))
    msg.changed[path].CopyFrom(wire.to_fact(reading))
    return agent_pb2.ConnectRequest(delta=msg)
