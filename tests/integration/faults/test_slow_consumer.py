"""A slow consumer: a client that sends and never reads its replies cannot grow the
aggregator's memory without bound. Each FullFacts earns an Ack and each heartbeat with a
wrong hash a Resync; gRPC's flow control stops the aggregator's writes once the client's
window is full, its stream task stops reading, and the client's own writes stall. The RSS
of the aggregator process is sampled while the client pushes for up to BUDGET_S."""

from __future__ import annotations

import asyncio
import time

import grpc

from plumb import facts as wire
from plumb.v1 import agent_pb2, agent_pb2_grpc

from .conftest import DbAggregator, full_msg, hello_msg, rss_kib

FACTS = {f"gpus[{i}].name": wire.Reading.ok("NVIDIA H100 80GB HBM3") for i in range(8)}
BUDGET_S = 20.0
MAX_PAIRS = 200_000
MAX_GROWTH_MIB = 64


async def test_a_client_that_never_reads_cannot_grow_aggregator_memory(tmp_path):
    agg = DbAggregator(tmp_path, extra_env={"PLUMB_LOG_LEVEL": "WARNING"}).start()
    assert agg.proc is not None
    baseline = rss_kib(agg.proc.pid)
    stale = agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=1, content_sha256=bytes(32)))
    full = full_msg(FACTS)
    sent, stalled, peak = 0, False, baseline
    # Without BDP probing the client's receive window stays at HTTP/2's 64 KiB, so a few
    # thousand unread replies fill it; a larger window only moves the point where it stalls.
    async with grpc.aio.insecure_channel(
        agg.grpc, options=[("grpc.http2.bdp_probe", 0)]
    ) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(hello_msg("slow-1"))
        await call.read()  # Welcome; nothing is read after it
        deadline = time.monotonic() + BUDGET_S
        while sent < MAX_PAIRS and time.monotonic() < deadline:
            # seq may never go backwards on a stream: number each pair (write serializes now).
            full.full_facts.seq = stale.heartbeat.seq = sent + 1
            try:
                await asyncio.wait_for(call.write(full), timeout=3)
                await asyncio.wait_for(call.write(stale), timeout=3)
            except TimeoutError:
                stalled = True
                break
            sent += 1
            if sent % 1000 == 0:
                peak = max(peak, rss_kib(agg.proc.pid))
        peak = max(peak, rss_kib(agg.proc.pid))
        assert agg.get("/healthz").status_code == 200  # the aggregator still serves
        call.cancel()
    growth_mib = (peak - baseline) / 1024
    print(f"pairs sent {sent}, stalled {stalled}, RSS {baseline} -> {peak} KiB")
    assert stalled, f"{sent} pairs went out without back-pressure"
    assert growth_mib < MAX_GROWTH_MIB, f"RSS grew {growth_mib:.0f} MiB"
    assert agg.stop() == 0
