"""The agent's channel: one for its life, whose connection gRPC makes again after a stream
ends; a Welcome that never comes gets a new channel, as its connection may be gone without
a word, which gRPC (sending no pings) would not notice.

The aggregator is a stand-in gRPC server on loopback; which TCP connection a stream came on
is its peer address, as the server sees it.
"""

from __future__ import annotations

import asyncio

import grpc
from standin import streaming

from plumb import facts as wire
from plumb.agent.settings import StreamSettings
from plumb.v1 import agent_pb2, agent_pb2_grpc

FACTS = {"driver.driver_version": wire.Reading.ok("580.173.02")}
SETTINGS = StreamSettings(
    poll_interval_s=60, reconnect_window_s=0.05, probe_max_s=0.2, welcome_timeout_s=0.5
)


class Aggregator(agent_pb2_grpc.AgentServiceServicer):
    """The first stream as `first` says: "ended" welcomes it and ends it, "silent" reads its
    Hello and answers nothing; the second is welcomed and held open."""

    def __init__(self, first: str):
        self.first = first
        self.peers: list[str] = []
        self.first_dropped = asyncio.Event()  # the agent cancelled the silent stream
        self.second = asyncio.Event()

    async def Connect(self, request_iterator, context):  # noqa: N802
        self.peers.append(context.peer())
        first = len(self.peers) == 1
        await context.read()  # Hello
        if first and self.first == "silent":
            try:
                await asyncio.Event().wait()
            finally:
                self.first_dropped.set()
        await context.write(agent_pb2.ConnectResponse(welcome=agent_pb2.Welcome(session_id="s")))
        if first:
            return
        self.second.set()
        while await context.read() is not grpc.aio.EOF:
            pass


async def two_streams(first: str) -> Aggregator:
    """Run an agent against a stand-in whose first stream goes as `first` says, until its
    second stream is welcomed and, after a silent first, the agent has dropped that one
    (before the server stops, which would end it anyway)."""
    servicer = Aggregator(first)
    async with streaming(servicer, lambda: FACTS, SETTINGS):
        async with asyncio.timeout(30):
            await servicer.second.wait()
            if first == "silent":
                await servicer.first_dropped.wait()
    return servicer


async def test_after_a_stream_ends_the_agent_says_hello_again_on_the_same_connection():
    servicer = await two_streams("ended")
    assert servicer.peers[0] == servicer.peers[1]


async def test_after_no_welcome_the_agent_drops_the_connection_and_dials_a_new_one():
    servicer = await two_streams("silent")
    assert servicer.peers[0] != servicer.peers[1]
