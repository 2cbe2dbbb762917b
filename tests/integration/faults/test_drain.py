"""SIGTERM drains: open streams end with a gRPC status the agent can act on, and a change
acknowledged just before the signal is in the history after the process exits."""

from __future__ import annotations

import asyncio
import signal
import time

import grpc

from plumb import facts as wire
from plumb.aggregator.store import Store
from plumb.v1 import agent_pb2_grpc

from .conftest import DbAggregator, delta_msg, full_msg, hello_msg

FACTS = {
    "driver.driver_version": wire.Reading.ok("550.54.15"),
    "host.kernel": wire.Reading.ok("6.8"),
}


async def test_sigterm_closes_streams_with_a_status_and_flushes_writes(tmp_path):
    agg = DbAggregator(tmp_path).start()
    async with grpc.aio.insecure_channel(agg.grpc) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(hello_msg("drain-1"))
        assert (await call.read()).WhichOneof("message") == "welcome"
        await call.write(full_msg(FACTS))
        assert (await call.read()).ack.seq == 1
        facts = dict(FACTS)
        for seq in range(2, 12):  # ten changes, the last acked right before the signal
            facts["driver.driver_version"] = wire.Reading.ok(f"570.{seq}")
            await call.write(
                delta_msg(seq, "driver.driver_version", facts["driver.driver_version"], facts)
            )
            assert (await call.read()).ack.seq == seq
        started = time.monotonic()
        agg.proc.send_signal(signal.SIGTERM)
        try:
            msg = await asyncio.wait_for(call.read(), timeout=15)
            assert msg is grpc.aio.EOF
        except grpc.aio.AioRpcError:
            pass
        code = await asyncio.wait_for(call.code(), timeout=15)
        closed_after = time.monotonic() - started
    assert agg.proc.wait(timeout=30) == 0, agg.log()
    assert code == grpc.StatusCode.UNAVAILABLE, (code, await call.details())
    # Streams get the server's grace period (5 s) to end, then are cancelled with UNAVAILABLE,
    # the status on which agents reconnect (to another replica, behind a Service).
    assert closed_after < 8.0, f"stream closed {closed_after:.1f} s after SIGTERM"

    store = Store(agg.db)
    try:
        history = store.history("drain-1", limit=100)
        assert [h.new.value for h in history if h.new is not None][0] == "570.11"
        assert len(history) == 10
        assert store.load()[0].facts["driver.driver_version"] == wire.Reading.ok("570.11")
    finally:
        store.close()
