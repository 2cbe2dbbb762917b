"""A stand-in aggregator for the agent's stream tests: the test's servicer served by a gRPC
server on loopback, with a real agent streaming to it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import grpc

from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient
from plumb.v1 import agent_pb2_grpc


@contextlib.asynccontextmanager
async def streaming(
    servicer: agent_pb2_grpc.AgentServiceServicer,
    collect: Callable,
    settings: StreamSettings,
    sense: Callable | None = None,
) -> AsyncIterator[StreamClient]:
    """Serve `servicer` on loopback and run an agent against it (facts from `collect`,
    readings from `sense`) while the body runs; then stop the agent and the server."""
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = asyncio.Event()
    client = StreamClient(
        f"127.0.0.1:{port}", Identity("gpu-1", "test", "b-1"), collect, settings, sense=sense
    )
    agent = asyncio.create_task(client.run(stop))
    try:
        yield client
    finally:
        stop.set()
        await asyncio.wait_for(agent, 10)
        await server.stop(0)
