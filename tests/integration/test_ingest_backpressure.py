"""Back-pressure on Hello (ingest/syncing.py): past the syncing cap a stream is welcomed and
its facts wait their turn; past the line of waiting streams the aggregator answers
RESOURCE_EXHAUSTED with a retry hint before Welcome, and the agent waits the hint out and
gets in once a slot is free.

The aggregator is the real one (`open_process`, SQLite in a temp dir) behind a real
grpc.aio server on loopback, in the test's own loop; the agent is the real StreamClient.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

import grpc
import pytest

from plumb import facts as wire
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient
from plumb.aggregator.process import open_process
from plumb.aggregator.settings import AggregatorSettings
from plumb.v1 import agent_pb2, agent_pb2_grpc

pytestmark = pytest.mark.integration

FACTS = {
    "host.kernel": wire.Reading.ok("6.8.0-1030-aws"),
    "gpus[0].index": wire.Reading.ok(0),
    "gpus[0].name": wire.Reading.ok("NVIDIA L4"),
}


def _hello(name: str) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        hello=agent_pb2.Hello(node_name=name, agent_version="test", boot_id=f"boot-{name}")
    )


def _full(seq: int) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        full_facts=agent_pb2.FullFacts(
            seq=seq, content_sha256=wire.content_digest(FACTS), facts=wire.unflatten(FACTS)
        )
    )


async def _welcomed(stub: agent_pb2_grpc.AgentServiceStub, name: str):
    """A stream whose Hello for `name` was answered with a Welcome."""
    call = stub.Connect()
    await call.write(_hello(name))
    assert (await call.read()).WhichOneof("message") == "welcome"
    return call


async def _refused(stub: agent_pb2_grpc.AgentServiceStub, name: str) -> grpc.aio.AioRpcError:
    """The error a stream whose Hello names `name` ends with, before any Welcome."""
    call = stub.Connect()
    await call.write(_hello(name))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    return refused.value


async def _serve(tmp_path, max_waiting_streams: int):
    """HOST:PORT of an aggregator's gRPC side that lets one stream sync at a time and
    `max_waiting_streams` wait their turn."""
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        # One slot, and a second taken to sync one stream before any rate is measured.
        ingest={
            "min_syncing_streams": 1,
            "max_syncing_streams": 1,
            "sync_target_s": 1.0,
            "max_waiting_streams": max_waiting_streams,
        },
    )
    process = await open_process(settings)
    writer = asyncio.create_task(process.writer.run())
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(process.ingest, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    process.streams.close_all()
    await server.stop(0)
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    process.store.close()


@pytest.fixture
async def target(tmp_path):
    """One stream syncs at a time, and none waits: the next Hello is refused."""
    async for address in _serve(tmp_path, 0):
        yield address


@pytest.fixture
async def lined_target(tmp_path):
    """One stream syncs at a time, and one more waits its turn."""
    async for address in _serve(tmp_path, 1):
        yield address


async def test_past_the_limit_an_agent_is_welcomed_and_synced_on_its_turn(lined_target):
    async with grpc.aio.insecure_channel(lined_target) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        first = await _welcomed(stub, "syncing-1")  # holds the one slot
        second = await _welcomed(stub, "syncing-2")  # waits in line
        await second.write(_full(1))

        refused = await _refused(stub, "syncing-3")  # the line is full
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "1 wait their turn" in refused.details()

        await first.write(_full(1))
        assert (await first.read()).WhichOneof("message") == "ack"
        # The first stream's facts applied, the waiting one's are read: its Ack follows.
        ack = await asyncio.wait_for(second.read(), 10)
        assert ack.WhichOneof("message") == "ack"
        assert ack.ack.seq == 1
        first.cancel()
        second.cancel()


async def test_a_hello_past_the_limit_gets_resource_exhausted_with_a_retry_hint(target):
    async with grpc.aio.insecure_channel(target) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        first = await _welcomed(stub, "syncing-1")  # holds the one slot

        refused = await _refused(stub, "syncing-2")
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "ingest.max_syncing_streams" in refused.details()
        # Nothing finished syncing yet: one stream taken to sync in 1 s, so this one's turn is
        # in 1 s.
        assert ("plumb-retry-after-s", "1") in tuple(refused.trailing_metadata())

        # Its first facts applied, the first stream frees the slot: the next Hello is welcome.
        await first.write(_full(1))
        assert (await first.read()).WhichOneof("message") == "ack"
        third = await _welcomed(stub, "syncing-2")
        first.cancel()
        third.cancel()


class Seen(logging.Handler):
    """The agent's log records by message, each with an event set when it first appears
    (the agent logs on the test's loop, so setting them here is safe)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: dict[str, list[logging.LogRecord]] = defaultdict(list)
        self.events: dict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def emit(self, record: logging.LogRecord) -> None:
        self.records[record.getMessage()].append(record)
        self.events[record.getMessage()].set()

    async def first(self, message: str, timeout_s: float = 20.0) -> logging.LogRecord:
        async with asyncio.timeout(timeout_s):
            await self.events[message].wait()
        return self.records[message][0]


@pytest.fixture
def agent_log():
    seen, logger = Seen(), logging.getLogger("plumb.agent.stream")
    level = logger.level
    logger.addHandler(seen)
    logger.setLevel(logging.INFO)
    yield seen
    logger.removeHandler(seen)
    logger.setLevel(level)


async def test_the_agent_waits_out_the_hint_then_gets_in(target, agent_log):
    async with grpc.aio.insecure_channel(target) as channel:
        holder = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await holder.write(_hello("holder"))
        assert (await holder.read()).WhichOneof("message") == "welcome"

        settings = StreamSettings(
            poll_interval_s=0.2, reconnect_window_s=0.2, backoff_max_s=0.4, probe_max_s=0.2
        )
        identity = Identity("patient", "test", "boot-p")
        client = StreamClient(target, identity, lambda: FACTS, settings)
        stop = asyncio.Event()
        agent = asyncio.create_task(client.run(stop))
        try:
            refused = await agent_log.first("stream closed")
            assert refused.code == "RESOURCE_EXHAUSTED"
            # Its next attempt waits at least the 1 s hint (plus up to 1.25 s), far past its
            # own 0.4 s backoff cap.
            wait = await agent_log.first("reconnecting")
            assert 1.0 <= wait.delay_s <= 2.25
            assert client.connections == 0

            holder.cancel()  # the slot frees as the holding stream ends
            await agent_log.first("stream opened")
            assert client.connections == 1
        finally:
            stop.set()
            await asyncio.wait_for(agent, timeout=10)
