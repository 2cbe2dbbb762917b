"""The agents' port opens before the aggregator is built (ingest/port.py): a stream that
arrives while the stored nodes load is held and then served on its own connection, against
the loaded state; one held too long is refused UNAVAILABLE with a retry hint.

The aggregator is the real one (`open_process`, SQLite in a temp dir) behind the real
`listen` on loopback, in the test's own loop.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from plumb import facts as wire
from plumb.aggregator.ingest.port import STARTING_RETRY_S, listen
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


async def _report_once(settings: AggregatorSettings, node: str):
    """Store `node`'s facts through a whole aggregator; the time it was first seen."""
    process = await open_process(settings)
    writer = asyncio.create_task(process.writer.run())
    port = await listen(settings)
    port.ready.set_result(process.ingest)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port.number}") as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
            await call.write(_hello(node))
            assert (await call.read()).WhichOneof("message") == "welcome"
            await call.write(_full(1))
            assert (await call.read()).WhichOneof("message") == "ack"
            await process.writer.flush()
            first_seen = process.core.node(node).first_seen_at
            call.cancel()
    finally:
        process.streams.close_all()
        await port.server.stop(0)
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        process.store.close()
    return first_seen


async def test_a_stream_held_while_nodes_load_is_served_against_the_loaded_node(tmp_path):
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}", grpc_listen="127.0.0.1:0"
    )
    first_seen = await _report_once(settings, "held-1")

    # A restart: the port first, the Hello sent before anything is loaded.
    port = await listen(settings)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port.number}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(_hello("held-1"))
        welcome = asyncio.create_task(call.read())
        process = await open_process(settings)
        writer = asyncio.create_task(process.writer.run())
        try:
            assert not welcome.done()  # nothing answers a stream before ingest is built
            port.ready.set_result(process.ingest)
            assert (await welcome).WhichOneof("message") == "welcome"
            await call.write(_full(1))
            assert (await call.read()).WhichOneof("message") == "ack"
            node = process.core.node("held-1")
            # The stored node, not a new one: first seen when it was first reported.
            assert node.first_seen_at == first_seen
            assert node.connected
            call.cancel()
        finally:
            process.streams.close_all()
            await port.server.stop(0)
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            process.store.close()


async def test_a_stream_held_past_the_hold_is_refused_unavailable_with_a_retry_hint(tmp_path):
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        grpc_listen="127.0.0.1:0",
        ingest={"start_hold_s": 0.1},
    )
    port = await listen(settings)  # ingest never built: the aggregator is still starting
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port.number}") as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
            await call.write(_hello("early-1"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call.read()
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "starting" in refused.value.details()
        hint = ("plumb-retry-after-s", str(STARTING_RETRY_S))
        assert hint in tuple(refused.value.trailing_metadata())
    finally:
        await port.server.stop(0)
