"""The agents' port at the HTTP/2 level (ingest/port.py): it takes each agent's messages
without probing the connection's bandwidth.

gRPC's bandwidth-delay-product probe answers data it receives with a PING, and tunes the
connection's windows from the round trip. A fleet's connections each carry a few small
messages a minute, so the probe found nothing to tune, and with 10,000 agents it cost a
fifth of the aggregator's steady CPU (bench/README.md, round 53).

A raw HTTP/2 client (h2) speaks to the real `listen` on loopback, with a servicer that
answers Hello with Welcome behind it, and notes every PING the server starts.
"""

from __future__ import annotations

import asyncio
import struct

import grpc
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, PingAckReceived, PingReceived

from plumb.aggregator.ingest.port import listen
from plumb.aggregator.settings import AggregatorSettings
from plumb.v1 import agent_pb2, agent_pb2_grpc

pytestmark = pytest.mark.integration

OUR_PING = b"plumb-53"  # the opaque data of the client's own PING


class _Welcoming(agent_pb2_grpc.AgentServiceServicer):
    """Welcomes each Hello with the size of the message it read as the session id."""

    async def Connect(self, request_iterator, context):  # noqa: N802
        hello = await context.read()
        welcome = agent_pb2.Welcome(session_id=str(hello.ByteSize()))
        await context.write(agent_pb2.ConnectResponse(welcome=welcome))
        await context.read()  # holds the stream open until the client goes


def _grpc_message(msg: agent_pb2.ConnectRequest) -> bytes:
    body = msg.SerializeToString()
    return struct.pack(">?I", False, len(body)) + body  # not compressed, then its length


async def test_the_agents_port_sends_no_ping_for_the_data_it_receives(tmp_path):
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}", grpc_listen="127.0.0.1:0"
    )
    port = await listen(settings)
    port.ready.set_result(_Welcoming())
    reader, writer = await asyncio.open_connection("127.0.0.1", port.number)
    h2 = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8"))
    pings: list[bytes] = []  # the opaque data of every PING the server started
    try:
        h2.initiate_connection()
        stream = h2.get_next_available_stream_id()
        h2.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/plumb.v1.AgentService/Connect"),
                (":authority", f"127.0.0.1:{port.number}"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        hello = agent_pb2.Hello(node_name="gpu-1", agent_version="test", boot_id="boot-1")
        h2.send_data(stream, _grpc_message(agent_pb2.ConnectRequest(hello=hello)))
        writer.write(h2.data_to_send())
        async with asyncio.timeout(30):
            welcomed = acked = False
            while not acked:
                data = await reader.read(65536)
                assert data, "the server closed the connection"
                for event in h2.receive_data(data):
                    if isinstance(event, PingReceived):
                        pings.append(event.ping_data)
                    elif isinstance(event, DataReceived) and event.stream_id == stream:
                        h2.acknowledge_received_data(event.flow_controlled_length, stream)
                        if not welcomed:
                            # Frames come in order: once our own PING is answered, every
                            # PING the server sent for the Hello has come before.
                            welcomed = True
                            h2.ping(OUR_PING)
                    elif isinstance(event, PingAckReceived) and event.ping_data == OUR_PING:
                        acked = True
                writer.write(h2.data_to_send())
        assert welcomed
        assert pings == []
    finally:
        writer.close()
        await port.server.stop(0)


async def test_a_message_of_the_largest_size_taken_arrives_whole(tmp_path):
    # Without the probe the windows stay at HTTP/2's 64 KiB: a larger message waits for the
    # server to open its stream's window, which it does for the message it is reading.
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}", grpc_listen="127.0.0.1:0"
    )
    port = await listen(settings)
    port.ready.set_result(_Welcoming())
    name = "n" * (settings.ingest.max_message_bytes - 64)
    hello = agent_pb2.ConnectRequest(hello=agent_pb2.Hello(node_name=name))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port.number}") as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
            await call.write(hello)
            async with asyncio.timeout(30):
                reply = await call.read()
            call.cancel()
        assert reply.welcome.session_id == str(hello.ByteSize())
        assert hello.ByteSize() > 1_000_000
    finally:
        await port.server.stop(0)
