"""Bad input on the agent stream: each bound refuses clearly, is counted and stores nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import pytest
from conftest import scrape
from test_protocol import FACTS, delta, full, hello, open_stream, reply

from plumb import facts as wire
from plumb.v1 import agent_pb2, agent_pb2_grpc, facts_pb2


@pytest.fixture
async def channel(aggregator):
    async with grpc.aio.insecure_channel(aggregator.grpc) as ch:
        yield ch


async def refused(call, msg: agent_pb2.ConnectRequest | bytes) -> str:
    """Send `msg` and return the details of the INVALID_ARGUMENT that must end the stream."""
    await call.write(msg)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async with asyncio.timeout(10):  # an accepted message leaves the stream open
            while True:
                await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    return err.value.details()


async def accepted(channel, name: str) -> grpc.aio.StreamStreamCall:
    """A stream for `name` whose FullFacts(FACTS, seq 1) was acked."""
    call = await open_stream(channel, name)
    await call.write(full(FACTS))
    assert (await call.read()).ack.seq == 1
    return call


def counted(aggregator, reason: str) -> bool:
    sample = ("plumb_ingest_streams_closed_by_aggregator_total", {"reason": reason}, 1.0)
    return sample in scrape(aggregator)


def unchanged(aggregator, name: str) -> bool:
    """The node still holds exactly FACTS, and no history row was written."""
    node = aggregator.json(f"/v1/nodes/{name}")
    return (
        node["content_hash"] == wire.content_hash(FACTS)
        and aggregator.json(f"/v1/nodes/{name}/history") == []
    )


def absent(aggregator, name: str) -> bool:
    return aggregator.get(f"/v1/nodes/{name}").status_code == 404 and aggregator.node(name) is None


def gpus(count: int) -> dict[str, wire.Reading]:
    return {f"gpus[{i}].index": wire.Reading.ok(i) for i in range(count)}


async def test_full_facts_with_more_gpus_than_the_limit_are_refused(aggregator, channel):
    call = await open_stream(channel, "gpu-hoarder")
    details = await refused(call, full(gpus(65)))
    assert "65 GPUs is more than the 64" in details
    assert "PLUMB_INGEST__MAX_GPUS_PER_NODE" in details
    assert counted(aggregator, "too_many_gpus")
    assert absent(aggregator, "gpu-hoarder")


async def test_a_delta_adding_a_gpu_past_the_limit_is_refused(aggregator, channel):
    call = await accepted(channel, "grower")
    extra = {"gpus[64].index": wire.Reading.ok(64)}
    details = await refused(call, delta(2, extra, {**FACTS, **extra}))
    assert "ingest.max_gpus_per_node" in details
    assert counted(aggregator, "too_many_gpus")
    assert unchanged(aggregator, "grower")


async def test_a_delta_touching_too_many_fields_is_refused(aggregator, channel):
    call = await accepted(channel, "chatty")
    msg = delta(2, {}, FACTS)
    msg.delta.removed.extend(f"host.kernel{i}" for i in range(4097))
    details = await refused(call, msg)
    assert "4097 fields, more than the 4096 allowed (ingest.max_delta_fields)" in details
    assert "send FullFacts instead" in details
    assert counted(aggregator, "too_many_fields")
    assert unchanged(aggregator, "chatty")


async def test_an_over_long_error_string_is_refused_not_cut(aggregator, channel):
    call = await accepted(channel, "verbose")
    bad = {"driver.driver_version": wire.Reading("error", error="e" * (wire.MAX_VALUE_CHARS + 1))}
    details = await refused(call, delta(2, bad, {**FACTS, **bad}))
    assert "driver.driver_version: error longer than 4096 characters" in details
    assert counted(aggregator, "string_too_long")
    assert unchanged(aggregator, "verbose")


async def test_a_nul_in_a_fact_is_refused_before_the_store_sees_it(aggregator, channel):
    call = await open_stream(channel, "nul")
    facts = {**FACTS, "driver.driver_version": wire.Reading("error", error="bad\x00read")}
    # Reading.failed would clean it: a broken agent builds the reading by hand.
    details = await refused(call, full(facts))
    assert "driver.driver_version: error contains a NUL character" in details
    assert absent(aggregator, "nul")


async def test_an_over_long_hello_capability_is_refused(aggregator, channel):
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
    msg = hello("boastful")
    msg.hello.capabilities.append("c" * 129)
    details = await refused(call, msg)
    assert "limited to 128 characters" in details
    assert counted(aggregator, "string_too_long")
    assert absent(aggregator, "boastful")


async def test_a_delta_with_a_seq_going_backwards_is_refused(aggregator, channel):
    call = await accepted(channel, "replayer")
    after = {**FACTS, "host.kernel": wire.Reading.ok("6.9.0")}
    details = await refused(call, delta(1, {"host.kernel": after["host.kernel"]}, after))
    assert "FactsDelta seq 1 goes backwards: this stream is at seq 1" in details
    assert counted(aggregator, "seq_backwards")
    assert unchanged(aggregator, "replayer")


async def test_full_facts_with_a_seq_going_backwards_are_refused(aggregator, channel):
    call = await accepted(channel, "rewinder")
    after = {**FACTS, "host.kernel": wire.Reading.ok("6.9.0")}
    details = await refused(call, full(after, seq=1))
    assert "FullFacts seq 1 goes backwards" in details
    assert unchanged(aggregator, "rewinder")


async def test_an_unknown_fact_status_in_full_facts_is_refused_naming_the_field(
    aggregator, channel
):
    call = await open_stream(channel, "from-the-future")
    msg = full(FACTS)
    msg.full_facts.facts.driver.driver_version.status = 7  # proto3 enums are open
    details = await refused(call, msg)
    assert "driver.driver_version: unknown FactStatus 7" in details
    assert "upgrade the aggregator" in details
    assert counted(aggregator, "unknown_enum")
    assert absent(aggregator, "from-the-future")


async def test_an_unknown_fact_status_in_a_delta_is_refused_naming_the_field(aggregator, channel):
    call = await accepted(channel, "future-delta")
    msg = delta(2, {"host.kernel": wire.Reading.ok("6.9.0")}, FACTS)
    msg.delta.changed["host.kernel"].status = 9
    details = await refused(call, msg)
    assert "host.kernel: unknown FactStatus 9" in details
    assert unchanged(aggregator, "future-delta")


async def test_a_non_finite_number_is_refused(aggregator, channel):
    call = await accepted(channel, "infinite")
    bad = {"gpus[0].power_limit_watts": wire.Reading.ok(float("inf"))}
    details = await refused(call, delta(2, bad, FACTS))
    assert "gpus[0].power_limit_watts: value inf is not a finite number" in details
    assert unchanged(aggregator, "infinite")


@pytest.mark.parametrize(
    "early",
    [
        delta(1, FACTS, FACTS),
        agent_pb2.ConnectRequest(
            heartbeat=agent_pb2.Heartbeat(seq=0, content_sha256=wire.content_digest(FACTS))
        ),
    ],
    ids=["delta", "heartbeat"],
)
async def test_facts_before_full_facts_get_a_resync_and_create_no_node(aggregator, channel, early):
    call = await open_stream(channel, "eager")
    await call.write(early)
    assert await reply(call) == "resync"
    assert ("plumb_ingest_resyncs_total", {"reason": "no_full_facts"}, 1.0) in scrape(aggregator)
    assert absent(aggregator, "eager")
    await call.write(full(FACTS, seq=2))  # the agent's answer to the Resync is accepted
    assert (await call.read()).ack.seq == 2


async def test_full_facts_at_the_gpu_limit_are_accepted(aggregator, channel):
    call = await open_stream(channel, "dense")
    facts = {**FACTS, **gpus(64)}
    await call.write(full(facts))
    assert (await call.read()).ack.seq == 1
    assert len(aggregator.json("/v1/nodes/dense")["facts"]["gpus"]) == 64


async def test_bytes_that_are_no_connect_request_are_refused_not_an_internal_error(
    aggregator, channel
):
    call = channel.stream_stream(
        "/plumb.v1.AgentService/Connect",
        request_serializer=None,  # raw bytes, as a broken or hostile client sends them
        response_deserializer=agent_pb2.ConnectResponse.FromString,
    )()
    await call.write(hello("garbled").SerializeToString())
    assert await reply(call) == "welcome"
    details = await refused(call, b"\x12\xff\xff\xff")
    assert "not a plumb.v1.ConnectRequest" in details
    assert counted(aggregator, "undecodable")
    assert absent(aggregator, "garbled")


async def test_a_nul_in_hello_is_refused_before_the_store_sees_it(aggregator, channel):
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
    msg = hello("nul-hello")
    msg.hello.boot_id = "b\x00"
    details = await refused(call, msg)
    assert "contains a control character" in details
    assert counted(aggregator, "malformed_hello")
    assert absent(aggregator, "nul-hello")


def _full_with(change: Callable[[facts_pb2.NodeFacts], None]) -> agent_pb2.ConnectRequest:
    """FullFacts(FACTS) altered by hand after encoding, as a broken or hostile agent sends it
    (wire.unflatten itself refuses what it would carry)."""
    msg = full(FACTS)
    change(msg.full_facts.facts)
    return msg


@pytest.mark.parametrize(
    ("where", "change", "said"),
    [
        (
            "string fact",
            lambda f: setattr(f.host.kernel, "value", "6.8\x00evil"),
            "host.kernel: value contains a NUL character",
        ),
        (
            "plain string",
            lambda f: f.nccl.libraries.add(path="/usr/lib/libnccl.so\x00evil"),
            "nccl.libraries[0].path: value contains a NUL character",
        ),
    ],
    ids=["string-fact", "plain-string"],
)
async def test_a_nul_in_any_fact_string_is_refused(aggregator, channel, where, change, said):
    call = await open_stream(channel, "nul-value")
    details = await refused(call, _full_with(change))
    assert said in details, where
    assert counted(aggregator, "malformed_facts")
    assert absent(aggregator, "nul-value")


async def test_a_nul_in_a_delta_value_is_refused_and_nothing_stored(aggregator, channel):
    call = await accepted(channel, "nul-delta")
    bad = {"host.kernel": wire.Reading.ok("6.9\x00evil")}
    details = await refused(call, delta(2, bad, FACTS))
    assert "host.kernel: value contains a NUL character" in details
    assert unchanged(aggregator, "nul-delta")


async def test_a_negative_gpu_index_is_refused(aggregator, channel):
    call = await open_stream(channel, "minus-five")
    details = await refused(call, _full_with(lambda f: setattr(f.gpus[0].index, "value", -5)))
    assert "gpus[0].index is -5: a GPU index is never negative" in details
    assert counted(aggregator, "negative_gpu_index")
    assert absent(aggregator, "minus-five")


async def test_a_delta_making_a_gpu_index_negative_is_refused(aggregator, channel):
    call = await accepted(channel, "minus-delta")
    bad = {"gpus[0].index": wire.Reading.ok(-5)}
    details = await refused(call, delta(2, bad, {**FACTS, **bad}))
    assert "gpus[0].index is -5" in details
    assert unchanged(aggregator, "minus-delta")
