"""SIGKILL of the aggregator under streams changing facts as fast as it answers: every change an
Ack called durable (`Ack.durable_seq`) is in the history the database kept.

Issue "Trust nothing", row 4: an Ack used to be sent when the change was queued, and 21 of
3,668 acknowledged changes were missing after a SIGKILL. An Ack still answers at once (the
writer batches), but it says which seq is stored; nothing at or below that may be lost.
"""

from __future__ import annotations

import asyncio
import signal

import grpc

from plumb import facts as wire
from plumb.aggregator.store import Store
from plumb.v1 import agent_pb2_grpc

from .conftest import DbAggregator, delta_msg, full_msg, hello_msg

STREAMS = 20
PATH = "driver.driver_version"
# Changes per stream before the kill (at least; and one of them stored): enough that several
# of the writer's batches are in flight (and some not yet written) when it lands.
CHANGES_BEFORE_KILL = 40


async def _stream(target: str, name: str, durable: dict[str, int], started: asyncio.Event) -> None:
    facts = {PATH: wire.Reading.ok("v1"), "host.kernel": wire.Reading.ok("6.8")}
    async with grpc.aio.insecure_channel(target) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(hello_msg(name))
        await call.read()
        await call.write(full_msg(facts))
        durable[name] = (await call.read()).ack.durable_seq
        seq = 1
        try:
            while True:
                seq += 1
                facts[PATH] = wire.Reading.ok(f"v{seq}")
                await call.write(delta_msg(seq, PATH, facts[PATH], facts))
                reply = await call.read()
                assert reply.ack.seq == seq, reply
                durable[name] = max(durable[name], reply.ack.durable_seq)
                # Kill only once this stream had an Ack naming a stored change, so the check
                # below is never vacuous on a slow disk (a batch's commit can take longer
                # than the 40 changes).
                if seq >= CHANGES_BEFORE_KILL and durable[name] > 1:
                    started.set()
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
            return  # the aggregator died under us: what it called durable must be stored


async def test_every_change_an_ack_called_durable_survives_a_sigkill(tmp_path):
    agg = DbAggregator(tmp_path, extra_env={"PLUMB_LOG_LEVEL": "WARNING"}).start()
    durable: dict[str, int] = {}
    ready = [asyncio.Event() for _ in range(STREAMS)]
    tasks = [
        asyncio.create_task(_stream(agg.grpc, f"ack-{i:02d}", durable, ready[i]))
        for i in range(STREAMS)
    ]
    async with asyncio.timeout(120):
        await asyncio.gather(*(e.wait() for e in ready))
    agg.stop(signal.SIGKILL)
    async with asyncio.timeout(30):
        await asyncio.gather(*tasks)

    assert any(seq > 1 for seq in durable.values()), "no Ack ever named a stored change"
    store = Store(agg.db)
    try:
        for name, seq in sorted(durable.items()):
            kept = {str(h.new.value) for h in store.history(name, limit=10_000) if h.new}
            missing = [f"v{s}" for s in range(2, seq + 1) if f"v{s}" not in kept]
            assert not missing, f"{name}: durable up to seq {seq}, but history lacks {missing}"
    finally:
        store.close()
