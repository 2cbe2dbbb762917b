"""The agents' port opens before the aggregator is built (ingest/port.py): a stream that
arrives while the stored nodes load is held and then served on its own connection, against
the loaded state; one held too long is refused UNAVAILABLE with a retry hint. Streams gRPC
holds while the loop is busy past `ingest.max_pending_streams` are ended.

The aggregator is the real one (`open_process`, SQLite in a temp dir) behind the real
`listen` on loopback, in the test's own loop; the pending-limit test puts a servicer that only
welcomes behind it, and opens its streams from a process of their own.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

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


class _Welcoming(agent_pb2_grpc.AgentServiceServicer):
    """Answers each Hello with a Welcome, and nothing more."""

    async def Connect(self, request_iterator, context):  # noqa: N802
        await context.read()
        await context.write(agent_pb2.ConnectResponse(welcome=agent_pb2.Welcome()))


# Opens argv[2] streams at once, one channel each, to argv[1]: each sends a Hello. Prints
# "sent" once all are under way, then each stream's first reply or the status that ended it.
# The deadline bounds a stream gRPC might drop without a word. The test reads the lines and
# kills the process: its exit, with calls gRPC ended, has hung in CI.
_BURST = """
import sys, grpc
from plumb.v1 import agent_pb2, agent_pb2_grpc
channels = [grpc.insecure_channel(sys.argv[1]) for _ in range(int(sys.argv[2]))]
for channel in channels:
    grpc.channel_ready_future(channel).result(timeout=30)
hello = agent_pb2.ConnectRequest(hello=agent_pb2.Hello(node_name="burst", boot_id="b"))
stubs = [agent_pb2_grpc.AgentServiceStub(c) for c in channels]
calls = [stub.Connect(iter([hello]), timeout=20) for stub in stubs]
print("sent", flush=True)
for call in calls:
    try:
        print(next(call).WhichOneof("message"))
    except grpc.RpcError as exc:
        print(exc.code().name)
"""


async def test_streams_that_arrive_while_the_loop_is_busy_past_the_pending_limit_are_ended(
    tmp_path,
):
    # gRPC takes a new stream only on a turn of the aggregator's loop, and ends unanswered
    # those it holds meanwhile past ingest.max_pending_streams (gRPC's own default: 1,000).
    pending, streams = 5, 40
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        grpc_listen="127.0.0.1:0",
        ingest={"max_pending_streams": pending},
    )
    port = await listen(settings)
    port.ready.set_result(_Welcoming())
    burst = subprocess.Popen(  # noqa: ASYNC220 (the loop must not turn meanwhile)
        [sys.executable, "-c", _BURST, f"127.0.0.1:{port.number}", str(streams)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # The fault injected: a loop that takes no turn, from when every stream is under way
        # until 2 s after. No event can end it sooner: gRPC ends what it will not hold only
        # when the server next takes a stream, which needs a turn.
        assert burst.stdout.readline() == "sent\n"  # noqa: ASYNC250 (blocking is the point)
        time.sleep(2)  # noqa: ASYNC251
        async with asyncio.timeout(60):
            ended = await asyncio.to_thread(
                lambda: [burst.stdout.readline().strip() for _ in range(streams)]
            )
    finally:
        burst.kill()
        burst.wait()
        await port.server.stop(0)
    assert ended.count("welcome") <= pending + 1  # held, plus the one gRPC had asked for
    assert set(ended) - {"welcome"} <= {
        "CANCELLED",
        "INTERNAL",
        "UNAVAILABLE",
        "DEADLINE_EXCEEDED",
    }
