"""The stream protocol against a real aggregator, driven message by message by a raw client."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from conftest import scrape, until

from plumb import facts as wire
from plumb.agent.settings import StreamSettings
from plumb.agent.stream import Identity, StreamClient
from plumb.v1 import agent_pb2, agent_pb2_grpc, facts_pb2

FACTS = {
    "driver.driver_version": wire.Reading.ok("550.54.15"),
    "host.kernel": wire.Reading.ok("6.8.0-1030-aws"),
    "gpus[0].index": wire.Reading.ok(0),
    "gpus[0].name": wire.Reading.ok("NVIDIA L4"),
}


def hello(name: str) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        hello=agent_pb2.Hello(node_name=name, agent_version="test", boot_id="b-1")
    )


def full(flat: dict, seq: int = 1, digest: bytes | None = None) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        full_facts=agent_pb2.FullFacts(
            seq=seq,
            content_sha256=wire.content_digest(flat) if digest is None else digest,
            facts=wire.unflatten(flat),
        )
    )


def delta(seq: int, changed: dict, after: dict) -> agent_pb2.ConnectRequest:
    msg = agent_pb2.FactsDelta(seq=seq, content_sha256=wire.content_digest(after))
    for path, reading in changed.items():
        msg.changed[path].CopyFrom(wire.to_fact(reading))
    return agent_pb2.ConnectRequest(delta=msg)


async def open_stream(channel, name: str):
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
    await call.write(hello(name))
    welcome = await call.read()
    assert welcome.WhichOneof("message") == "welcome"
    return call


async def reply(call) -> str:
    msg = await call.read()
    return msg.WhichOneof("message")


@pytest.fixture
async def channel(aggregator):
    async with grpc.aio.insecure_channel(aggregator.grpc) as ch:
        yield ch


async def test_full_facts_then_delta_are_acked_and_applied(aggregator, channel):
    call = await open_stream(channel, "raw-1")
    await call.write(full(FACTS))
    assert (await call.read()).ack.seq == 1
    after = {**FACTS, "driver.driver_version": wire.Reading.ok("570.124.06")}
    await call.write(delta(2, {"driver.driver_version": after["driver.driver_version"]}, after))
    assert (await call.read()).ack.seq == 2
    until(lambda: aggregator.node("raw-1")["driver_version"] == "570.124.06", what="delta")
    await call.done_writing()


async def test_heartbeat_with_a_stale_hash_gets_a_resync(aggregator, channel):
    call = await open_stream(channel, "raw-2")
    await call.write(full(FACTS))
    await call.read()
    await call.write(
        agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=1, content_sha256=bytes(32)))
    )
    assert await reply(call) == "resync"
    await call.write(full(FACTS, seq=2))
    assert (await call.read()).ack.seq == 2
    assert ("plumb_ingest_resyncs_total", {"reason": "hash_mismatch"}, 1.0) in scrape(aggregator)


async def test_a_seq_gap_gets_a_resync_and_is_not_applied(aggregator, channel):
    call = await open_stream(channel, "raw-3")
    await call.write(full(FACTS))
    await call.read()
    after = {**FACTS, "host.kernel": wire.Reading.ok("6.9.0")}
    await call.write(delta(5, {"host.kernel": after["host.kernel"]}, after))
    assert await reply(call) == "resync"
    assert aggregator.node("raw-3") is not None
    assert aggregator.json("/v1/nodes/raw-3")["kernel"] == "6.8.0-1030-aws"


async def test_malformed_full_facts_closes_the_stream_and_stores_nothing(aggregator, channel):
    call = await open_stream(channel, "liar")
    await call.write(full(FACTS, digest=b"\xff" * 32))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "content_sha256 does not match" in err.value.details()
    assert aggregator.node("liar") is None
    assert aggregator.get("/v1/nodes/liar/history").status_code == 404
    assert "stream closed" in aggregator.log()


@pytest.mark.parametrize("kind", ["full_facts", "delta", "heartbeat"])
async def test_a_message_without_the_raw_digest_is_refused_with_what_to_do(
    aggregator, channel, kind
):
    # An agent from before content_sha256 sent a hex content_hash (field 2, now reserved).
    call = await open_stream(channel, f"old-{kind.replace('_', '-')}")
    if kind != "full_facts":
        await call.write(full(FACTS))
        assert (await call.read()).ack.seq == 1
    msg = {
        "full_facts": full(FACTS, digest=b""),
        "delta": agent_pb2.ConnectRequest(delta=agent_pb2.FactsDelta(seq=2)),
        "heartbeat": agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=1)),
    }[kind]
    await call.write(msg)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "content_sha256 must be the 32-byte SHA-256 digest, got 0 bytes" in err.value.details()
    assert "must be upgraded" in err.value.details()


async def test_a_delta_with_an_unknown_path_closes_the_stream(aggregator, channel):
    call = await open_stream(channel, "raw-4")
    await call.write(full(FACTS))
    await call.read()
    bad = {"gpus[0].warp_drive": wire.Reading.ok("on")}
    await call.write(delta(2, bad, {**FACTS, **bad}))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown fact path" in err.value.details()
    node = aggregator.json("/v1/nodes/raw-4")
    assert "warp_drive" not in node["facts"]["gpus"][0]
    assert node["content_hash"] == wire.content_hash(FACTS)
    assert aggregator.json("/v1/nodes/raw-4/history") == []  # first facts are no change


async def test_an_oversized_message_closes_the_stream_and_stores_nothing(aggregator, channel):
    call = await open_stream(channel, "huge")
    facts = facts_pb2.NodeFacts()
    for i in range(200):
        gpu = facts.gpus.add()
        gpu.name.status = facts_pb2.FACT_STATUS_ERROR
        gpu.name.error = "x" * 8000 + str(i)
    await call.write(
        agent_pb2.ConnectRequest(
            full_facts=agent_pb2.FullFacts(seq=1, content_sha256=b"h", facts=facts)
        )
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "exceeds the 1048576-byte limit" in err.value.details()
    assert aggregator.node("huge") is None
    assert "RESOURCE_EXHAUSTED" in aggregator.log()


async def test_the_first_message_must_be_hello(aggregator, channel):
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
    await call.write(full(FACTS))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Hello" in err.value.details()


async def test_an_invalid_node_name_is_refused(aggregator, channel):
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
    await call.write(hello("Not_A/Node"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_second_stream_for_a_node_replaces_the_first(aggregator, channel):
    first = await open_stream(channel, "twin")
    await first.write(full(FACTS))
    await first.read()
    async with grpc.aio.insecure_channel(aggregator.grpc) as other:
        second = await open_stream(other, "twin")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await first.read()
        assert err.value.code() == grpc.StatusCode.ABORTED
        assert "superseded" in err.value.details()
        await second.write(full(FACTS))
        assert (await second.read()).ack.seq == 1
        assert aggregator.node("twin")["connected"] is True
    until(lambda: aggregator.node("twin")["connected"] is False, what="disconnect")


async def test_a_resend_with_the_held_hash_is_acked_without_changing_anything(aggregator, channel):
    first = await open_stream(channel, "resender")
    await first.write(full(FACTS))
    await first.read()
    async with grpc.aio.insecure_channel(aggregator.grpc) as other:
        again = await open_stream(other, "resender")  # a reconnect after a restart or blip
        other_facts = {**FACTS, "driver.driver_version": wire.Reading.ok("1.0")}
        # The hash is what is held, so the payload is not read: the held facts stay.
        await again.write(full(other_facts, digest=wire.content_digest(FACTS)))
        assert (await again.read()).ack.seq == 1
        assert aggregator.node("resender")["driver_version"] == "550.54.15"
        assert aggregator.json("/v1/nodes/resender/history") == []


async def test_an_agent_writing_to_a_stream_the_aggregator_ended_reconnects(aggregator, channel):
    """The write that races the aggregator's end of a stream must read as a lost connection
    (which `StreamClient.run` retries), not as InvalidStateError, which ended its loop."""
    first = await open_stream(channel, "gpu-race")
    await open_stream(channel, "gpu-race")  # supersedes the first: the aggregator ends it
    assert await first.code() == grpc.StatusCode.ABORTED
    client = StreamClient(
        aggregator.grpc, Identity("gpu-race", "test", "b-1"), lambda: FACTS, StreamSettings()
    )
    client._write_lock = asyncio.Lock()  # as a session sets it
    beat = agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=1))
    with pytest.raises(ConnectionError, match="stream already ended"):
        await client._send(first, beat)
