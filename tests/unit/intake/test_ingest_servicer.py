"""The gRPC servicer, driven through a fake stream context: transport rules, statuses mapped
through `errors.STATUS`, and every state change handed to the intake."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from prometheus_client import CollectorRegistry
from test_intake import RecordingWriter, h100, make
from test_pacing import Taking

from plumb import facts as wire
from plumb.aggregator.ingest.auth import build_authenticator
from plumb.aggregator.ingest.servicer import Ingest
from plumb.aggregator.ingest.streams import Streams
from plumb.aggregator.metrics.collectors import IngestMetrics
from plumb.aggregator.pacing import Pacer
from plumb.aggregator.settings import AuthSettings, IngestSettings
from plumb.aggregator.state import live
from plumb.v1 import agent_pb2


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code


class FakeContext:
    """The ServicerContext surface Connect uses: reads from a queue, records writes."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.written: list[agent_pb2.ConnectResponse] = []
        self.wrote = asyncio.Event()

    async def read(self):
        return await self.inbox.get()

    async def write(self, msg: agent_pb2.ConnectResponse) -> None:
        self.written.append(msg)
        self.wrote.set()

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)

    def invocation_metadata(self) -> tuple:
        return ()

    def set_trailing_metadata(self, metadata: tuple) -> None:
        self.trailing = metadata

    async def reply(self, msg: agent_pb2.ConnectRequest) -> agent_pb2.ConnectResponse:
        """Send `msg` and wait for the next thing written back."""
        self.wrote.clear()
        count = len(self.written)
        await self.inbox.put(msg)
        async with asyncio.timeout(5):
            while len(self.written) == count:
                await self.wrote.wait()
                self.wrote.clear()
        return self.written[-1]


class Checks:
    """What the servicer tells validation."""

    def __init__(self) -> None:
        self.closed: list[tuple[str, str]] = []

    def check_result(self, node, result) -> None:  # not exercised here
        raise AssertionError("no check results in these tests")

    def stream_closed(self, node: str, session: str) -> None:
        self.closed.append((node, session))


def servicer(
    settings: IngestSettings | None = None,
    writer: RecordingWriter | None = None,
    pacer: Pacer | None = None,
    registry: CollectorRegistry | None = None,
):
    intake, state, _, writer, _ = make(writer)
    settings = settings or IngestSettings()
    checks = Checks()
    ingest = Ingest(
        Streams(settings.outbound_queue_max),
        intake,
        state,
        writer,  # type: ignore[arg-type]
        checks,  # type: ignore[arg-type]
        settings,
        IngestMetrics(registry or CollectorRegistry()),
        build_authenticator(AuthSettings()),
        pacer=pacer,
    )
    return ingest, state, checks, writer


def hello(node: str = "gpu-1", digest: bytes = b"") -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        hello=agent_pb2.Hello(
            node_name=node, agent_version="0.1.0", boot_id="b1", content_sha256=digest
        )
    )


def full(facts: dict[str, wire.Reading], seq: int = 1) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        full_facts=agent_pb2.FullFacts(
            seq=seq, facts=wire.unflatten(facts), content_sha256=wire.content_digest(facts)
        )
    )


def driver_delta(seq: int, new: dict[str, wire.Reading]) -> agent_pb2.ConnectRequest:
    """A FactsDelta of `seq` changing the driver version to `new`'s, hashed as `new`."""
    return agent_pb2.ConnectRequest(
        delta=agent_pb2.FactsDelta(
            seq=seq,
            changed={"driver.driver_version": wire.to_fact(new["driver.driver_version"])},
            content_sha256=wire.content_digest(new),
        )
    )


async def open_stream(ingest: Ingest, ctx: FakeContext, node: str = "gpu-1") -> asyncio.Task:
    task = asyncio.create_task(ingest.Connect(None, ctx))
    welcome = await ctx.reply(hello(node))
    assert welcome.WhichOneof("message") == "welcome"
    return task


async def refused(ingest: Ingest, node: str) -> Aborted:
    """The status a stream whose Hello names `node` is ended with, before any Welcome."""
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    await ctx.inbox.put(hello(node))
    with pytest.raises(Aborted) as info:
        await asyncio.wait_for(task, 5)
    return info.value


async def end(task: asyncio.Task, ctx: FakeContext) -> None:
    await ctx.inbox.put(grpc.aio.EOF)
    await asyncio.wait_for(task, 5)


async def streamed_and_ended(ingest: Ingest) -> None:
    """gpu-1's stream sends h100() and ends: the node is held, disconnected."""
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100()))
    await end(task, ctx)


async def test_full_facts_are_acked_and_reach_the_live_state():
    ingest, state, _, writer = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    ack = await ctx.reply(full(h100()))
    assert ack.ack.seq == 1
    node = state.get("gpu-1")
    assert node is not None and node.connected
    assert node.value("driver.driver_version") == "580.173.02"
    await end(task, ctx)
    assert not state.get("gpu-1").connected  # type: ignore[union-attr]


async def test_a_delta_with_a_seq_gap_asks_for_a_resync_and_changes_nothing():
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    await ctx.reply(full(h100()))
    new = h100(driver="590.44.01")
    delta = driver_delta(3, new)
    reply = await ctx.reply(delta)
    assert reply.WhichOneof("message") == "resync"
    assert state.get("gpu-1").value("driver.driver_version") == "580.173.02"  # type: ignore
    await end(task, ctx)


async def test_facts_the_store_cannot_take_are_refused_with_a_resync():
    ingest, state, _, writer = servicer(writer=RecordingWriter(room=False))
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    reply = await ctx.reply(full(h100()))
    assert reply.WhichOneof("message") == "resync"
    assert state.get("gpu-1") is None or not state.get("gpu-1").facts  # type: ignore
    await end(task, ctx)


async def test_an_oversized_message_ends_the_stream_with_the_status_of_too_large():
    ingest, _, _, _ = servicer(IngestSettings(max_message_bytes=4096))
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    facts = h100(gpus=64)
    for i in range(64):
        facts[f"gpus[{i}].uuid"] = wire.Reading.ok(f"GPU-{i:08d}-1111-2222-3333-444455556666")
    big = full(facts)
    assert big.ByteSize() > 4096
    await ctx.inbox.put(big)
    with pytest.raises(Aborted) as info:
        await asyncio.wait_for(task, 5)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_the_node_is_down_when_its_last_stream_ends_whichever_stream_that_was():
    ingest, state, checks, _ = servicer()
    a, b = FakeContext(), FakeContext()
    task_a = await open_stream(ingest, a)
    await a.reply(full(h100()))
    task_b = await open_stream(ingest, b)  # Hello only: supersedes a
    with pytest.raises(Aborted) as info:
        await asyncio.wait_for(task_a, 5)
    assert info.value.code == grpc.StatusCode.ABORTED
    await end(task_b, b)
    assert not state.get("gpu-1").connected  # type: ignore[union-attr]
    assert [node for node, _ in checks.closed] == ["gpu-1", "gpu-1"]


async def test_an_ack_names_only_changes_the_database_holds_as_durable():
    ingest, _, _, writer = servicer()
    ctx = FakeContext()
    task = await open_stream(ingest, ctx)
    first = await ctx.reply(full(h100()))
    assert (first.ack.seq, first.ack.durable_seq) == (1, 0)  # queued, not yet written
    writer.done = len(writer.updates)  # the writer has written everything queued so far
    second = await ctx.reply(full(h100(driver="550.163.01"), seq=2))
    assert (second.ack.seq, second.ack.durable_seq) == (2, 1)
    await end(task, ctx)


async def test_a_hello_naming_the_held_facts_resumes_without_full_facts():
    ingest, state, _, writer = servicer()
    await streamed_and_ended(ingest)
    assert not state.get("gpu-1").connected  # type: ignore[union-attr]
    submitted = len(writer.updates)

    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    welcome = await ctx.reply(hello(digest=wire.content_digest(h100())))
    assert welcome.welcome.resumed
    node = state.get("gpu-1")
    assert node is not None and node.connected
    (update,) = writer.updates[submitted:]
    assert update.connected and update.changes == ()  # connected, no fact rewritten
    # Its facts are at seq 0: the first delta is seq 1, applied to the held facts.
    new = h100(driver="590.44.01")
    delta = driver_delta(1, new)
    assert (await ctx.reply(delta)).ack.seq == 1
    assert state.get("gpu-1").value("driver.driver_version") == "590.44.01"  # type: ignore
    await end(task, ctx)


async def test_a_hello_naming_other_facts_gets_a_plain_welcome_and_must_send_full_facts():
    ingest, state, _, _ = servicer()
    await streamed_and_ended(ingest)

    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    moved = wire.content_digest(h100(driver="590.44.01"))
    welcome = await ctx.reply(hello(digest=moved))
    assert not welcome.welcome.resumed
    assert not state.get("gpu-1").connected  # type: ignore[union-attr]
    beat = agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=0, content_sha256=moved))
    assert (await ctx.reply(beat)).WhichOneof("message") == "resync"
    await end(task, ctx)


async def test_a_hello_for_a_node_not_held_is_not_resumed():
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    welcome = await ctx.reply(hello(digest=wire.content_digest(h100())))
    assert not welcome.welcome.resumed
    assert state.get("gpu-1") is None
    await end(task, ctx)


async def test_a_hello_whose_digest_is_not_32_bytes_ends_the_stream_invalid_argument():
    ingest, state, _, _ = servicer()
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    await ctx.inbox.put(hello(digest=b"short"))
    with pytest.raises(Aborted) as info:
        await asyncio.wait_for(task, 5)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "32-byte" in str(info.value)
    assert state.get("gpu-1") is None


async def test_a_stream_past_the_syncing_cap_is_welcomed_and_its_facts_wait_their_turn():
    settings = IngestSettings(min_syncing_streams=1, max_syncing_streams=1, max_waiting_streams=1)
    ingest, state, _, _ = servicer(settings)
    first, waiting = FakeContext(), FakeContext()
    first_task = await open_stream(ingest, first, "gpu-1")
    waiting_task = await open_stream(ingest, waiting, "gpu-2")
    await waiting.inbox.put(full(h100()))  # sent at once, as the agent does

    busy = await refused(ingest, "gpu-3")
    assert busy.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "1 wait their turn" in str(busy)
    # Not its turn yet: its facts are unread.
    assert waiting.inbox.qsize() == 1
    assert state.get("gpu-2") is None

    assert (await first.reply(full(h100()))).WhichOneof("message") == "ack"

    async with asyncio.timeout(5):  # the first synced: the waiting stream's turn
        while True:
            waiting.wrote.clear()
            if waiting.written[-1].WhichOneof("message") == "ack":
                break
            await waiting.wrote.wait()
    assert state.get("gpu-2").connected  # type: ignore[union-attr]
    await end(first_task, first)
    await end(waiting_task, waiting)


async def test_a_sync_waits_for_the_loop_to_be_free_after_the_one_before():
    # Each sync "takes" an hour by the pacer's clock, so the one after rests an hour.
    ingest, state, _, _ = servicer(pacer=Pacer(0.5, clock=Taking(3600)))
    first, second = FakeContext(), FakeContext()
    tasks = [await open_stream(ingest, first, "gpu-1"), await open_stream(ingest, second, "gpu-2")]
    assert (await first.reply(full(h100()))).WhichOneof("message") == "ack"
    await second.inbox.put(full(h100()))
    for _ in range(100):  # steps of the loop in which an unpaced sync would have run
        await asyncio.sleep(0)
    assert state.get("gpu-1").connected  # type: ignore[union-attr]
    assert state.get("gpu-2") is None and second.inbox.empty()  # read, waiting its turn
    tasks[1].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks[1]
    await end(tasks[0], first)


async def test_a_resuming_stream_takes_no_syncing_slot():
    # One slot and no line: a stream that has not sent its facts yet holds it.
    settings = IngestSettings(min_syncing_streams=1, max_syncing_streams=1, max_waiting_streams=0)
    ingest, _, _, _ = servicer(settings)
    await streamed_and_ended(ingest)
    syncing = FakeContext()
    syncing_task = await open_stream(ingest, syncing, "gpu-2")
    assert (await refused(ingest, "gpu-3")).code == grpc.StatusCode.RESOURCE_EXHAUSTED

    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    assert (await ctx.reply(hello(digest=wire.content_digest(h100())))).welcome.resumed
    await end(task, ctx)
    await end(syncing_task, syncing)


async def test_a_resume_the_store_has_no_room_for_is_a_plain_welcome():
    writer = RecordingWriter()
    ingest, state, _, _ = servicer(writer=writer)
    await streamed_and_ended(ingest)
    writer.has_room = False
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    assert not (await ctx.reply(hello(digest=wire.content_digest(h100())))).welcome.resumed
    assert not state.get("gpu-1").connected  # type: ignore[union-attr]
    await end(task, ctx)


async def test_restored_facts_with_the_clusters_overlay_resume_the_agents_own():
    # Before the restart: the agent's facts, with the Node's kubelet version overlaid.
    kubelet = {"host.kubelet_version": wire.Reading.ok("v1.31.2")}
    ingest, state, _, _ = servicer()
    state.set_cluster_facts("gpu-1", kubelet)
    await streamed_and_ended(ingest)
    stored = dict(state.get("gpu-1").facts)  # type: ignore[union-attr]
    assert stored["host.kubelet_version"] == kubelet["host.kubelet_version"]

    # After it: the store's facts carry the overlay; the Node is listed again.
    ingest, state, _, _ = servicer()
    state.restore("gpu-1", stored, content_hash=wire.content_hash(h100()))
    state.set_cluster_facts("gpu-1", kubelet)
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    assert (await ctx.reply(hello(digest=wire.content_digest(h100())))).welcome.resumed
    node = state.get("gpu-1")
    assert node is not None and node.reported == h100()
    assert node.facts["host.kubelet_version"] == kubelet["host.kubelet_version"]
    await end(task, ctx)


async def test_restored_facts_whose_overlay_is_not_known_yet_are_not_resumed():
    ingest, state, _, _ = servicer()
    merged = {**h100(), "host.kubelet_version": wire.Reading.ok("v1.31.2")}
    state.restore("gpu-1", merged, content_hash=wire.content_hash(h100()))
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    assert not (await ctx.reply(hello(digest=wire.content_digest(h100())))).welcome.resumed
    await end(task, ctx)


async def test_restored_facts_stored_as_the_agents_own_resume_without_hashing_them(monkeypatch):
    ingest, state, _, _ = servicer()
    state.restore("gpu-1", h100(), content_hash=wire.content_hash(h100()), own=True)

    def unhashed(flat):
        raise AssertionError("the stored facts were hashed again")

    monkeypatch.setattr(live, "content_hash", unhashed)
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    assert (await ctx.reply(hello(digest=wire.content_digest(h100())))).welcome.resumed
    assert state.get("gpu-1").connected  # type: ignore[union-attr]
    await end(task, ctx)


async def test_a_hellos_wait_for_its_welcome_is_timed_beside_the_replies():
    registry = CollectorRegistry()
    ingest, _, _, _ = servicer(registry=registry)
    ctx = FakeContext()
    task = asyncio.create_task(ingest.Connect(None, ctx))
    assert (await ctx.reply(hello())).WhichOneof("message") == "welcome"
    replies = "plumb_ingest_reply_seconds_count"
    assert registry.get_sample_value(replies, {"type": "hello"}) == 1
    assert registry.get_sample_value(replies, {"type": "full_facts"}) is None
    assert (await ctx.reply(full(h100()))).WhichOneof("message") == "ack"
    assert registry.get_sample_value(replies, {"type": "full_facts"}) == 1
    await end(task, ctx)
