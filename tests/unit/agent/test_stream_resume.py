"""The agent's reconnect: Hello offers the digest of the last facts sent, and where the
aggregator's Welcome says it holds them (`resumed`) the agent sends no FullFacts, only a
delta of seq 1 for what changed while it was away; where it does not, FullFacts as always.

The aggregator is a stand-in gRPC server that ends the first stream after acking its
FullFacts, then answers the second Hello as the test says, recording what comes.
"""

from __future__ import annotations

import asyncio

import grpc

from plumb import facts as wire
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient
from plumb.v1 import agent_pb2, agent_pb2_grpc

BEFORE = {"driver.driver_version": wire.Reading.ok("580.173.02")}
AFTER = {"driver.driver_version": wire.Reading.ok("590.44.01")}
# Reconnect within a fraction of a second; polls far apart, so a delta that comes at once
# after the second Welcome is the resume's immediate poll, not a timed one.
SETTINGS = StreamSettings(poll_interval_s=60, reconnect_window_s=0.05, probe_max_s=0.2)


class Restarting(agent_pb2_grpc.AgentServiceServicer):
    """Acks the first stream's FullFacts and ends it; welcomes the second with `resumed`
    and queues the second Hello and every message after it."""

    def __init__(self, resumed: bool):
        self.resumed = resumed
        self.streams = 0
        self.acked = asyncio.Event()
        self.restart = asyncio.Event()  # set by the test: end the first stream
        self.first_hello: agent_pb2.ConnectRequest | None = None
        self.sent: asyncio.Queue[agent_pb2.ConnectRequest] = asyncio.Queue()

    async def Connect(self, request_iterator, context):  # noqa: N802
        self.streams += 1
        first = self.streams == 1
        hello = await context.read()
        if first:
            self.first_hello = hello
        else:
            await self.sent.put(hello)
        welcome = agent_pb2.Welcome(session_id=f"s-{self.streams}", resumed=self.resumed)
        await context.write(agent_pb2.ConnectResponse(welcome=welcome))
        while (msg := await context.read()) is not grpc.aio.EOF:
            if first:
                assert msg.WhichOneof("message") == "full_facts"
                await context.write(agent_pb2.ConnectResponse(ack=agent_pb2.Ack(seq=1)))
                self.acked.set()
                await self.restart.wait()
                return  # the stream ends: the agent reconnects
            await self.sent.put(msg)


async def second_stream(resumed: bool) -> list[agent_pb2.ConnectRequest]:
    """The second Hello and the first facts message after it, the node's facts having
    moved from BEFORE to AFTER while the first stream ended."""
    servicer = Restarting(resumed)
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    facts = BEFORE
    stop = asyncio.Event()
    client = StreamClient(
        f"127.0.0.1:{port}", Identity("gpu-1", "test", "b-1"), lambda: facts, SETTINGS
    )
    agent = asyncio.create_task(client.run(stop))
    try:
        async with asyncio.timeout(30):
            await servicer.acked.wait()
            facts = AFTER
            servicer.restart.set()
            hello = await servicer.sent.get()
            assert servicer.first_hello is not None
            assert servicer.first_hello.hello.content_sha256 == b""  # nothing sent before it
            return [hello, await servicer.sent.get()]
    finally:
        stop.set()
        await asyncio.wait_for(agent, 10)
        await server.stop(0)


async def test_a_resumed_stream_sends_only_what_changed_as_delta_seq_1():
    hello, first = await second_stream(resumed=True)
    assert hello.hello.content_sha256 == wire.content_digest(BEFORE)
    assert first.WhichOneof("message") == "delta"
    assert first.delta.seq == 1
    assert dict(first.delta.changed) == {
        "driver.driver_version": wire.to_fact(AFTER["driver.driver_version"])
    }
    assert first.delta.content_sha256 == wire.content_digest(AFTER)


async def test_a_stream_not_resumed_sends_full_facts_as_before():
    hello, first = await second_stream(resumed=False)
    assert hello.hello.content_sha256 == wire.content_digest(BEFORE)
    assert first.WhichOneof("message") == "full_facts"
    assert first.full_facts.seq == 1
    assert wire.flatten(first.full_facts.facts) == AFTER
