"""PostgreSQL stopped under a running aggregator (pg_ctl stop, then start on the same port).

The database stays down for OUTAGE_S (30 s), six times the writer's capped retry backoff
(5 s), while reads, metrics and agents' updates go on.
"""

from __future__ import annotations

import asyncio
import time

import grpc
from conftest import scrape, until
from pg_fixture import new_server

from plumb import facts as wire
from plumb.v1 import agent_pb2_grpc

from .conftest import DbAggregator, delta_msg, full_msg, hello_msg

OUTAGE_S = 30.0
QUEUE_MAX = 30
PATH = "driver.driver_version"


def _metric(agg: DbAggregator, name: str) -> float:
    return next(v for n, _, v in scrape(agg) if n == name)


async def test_database_outage_degrades_then_buffered_writes_land(tmp_path):
    pg = new_server()
    try:
        await _outage(tmp_path, pg)
    finally:
        pg.remove()


async def _outage(tmp_path, pg) -> None:
    agg = DbAggregator(
        tmp_path,
        database=pg.create_database(),
        extra_env={"PLUMB_STORE__QUEUE_MAX": str(QUEUE_MAX)},
    ).start()
    facts = {PATH: wire.Reading.ok("v1"), "host.kernel": wire.Reading.ok("6.8")}
    seq = 1

    async def change(call) -> None:
        nonlocal seq
        seq += 1
        facts[PATH] = wire.Reading.ok(f"v{seq}")
        await call.write(delta_msg(seq, PATH, facts[PATH], facts))
        assert (await call.read()).ack.seq == seq

    def history() -> list[str]:
        return [h["new"]["value"] for h in agg.json("/v1/nodes/outage-1/history", limit=1000)]

    async with grpc.aio.insecure_channel(agg.grpc) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(hello_msg("outage-1"))
        await call.read()
        await call.write(full_msg(facts))
        assert (await call.read()).ack.seq == 1
        for _ in range(3):
            await change(call)
        until(lambda: history() == ["v4", "v3", "v2"], what="history before the outage")

        pg.stop()
        down_at = time.monotonic()
        ready = until(lambda: agg.get("/readyz").status_code == 503, what="/readyz degraded")
        body = agg.get("/readyz").json()
        assert ready and body["status"] == "degraded" and body["checks"]["database"] is False

        for _ in range(5):  # these wait in the writer's buffer
            await change(call)
        # Live state and metrics keep serving; what needs the database says so.
        assert agg.node("outage-1")["driver_version"] == "v9" and agg.node("outage-1")["connected"]
        until(lambda: _metric(agg, "plumb_store_healthy") == 0.0, what="writer unhealthy")
        pending = _metric(agg, "plumb_store_pending_updates")
        assert 5 <= pending <= QUEUE_MAX
        assert agg.get("/v1/nodes/outage-1/history").status_code == 503
        assert _metric(agg, "plumb_store_dropped_updates_total") == 0

        # More than the buffer holds: the aggregator refuses the change with a Resync rather
        # than keep in memory what the database would never get, and counts the drop.
        accepted = seq
        for _ in range(2 * QUEUE_MAX):
            seq += 1
            facts[PATH] = wire.Reading.ok(f"v{seq}")
            await call.write(delta_msg(seq, PATH, facts[PATH], facts))
            reply = await call.read()
            if reply.WhichOneof("message") == "resync":
                assert "write queue is full" in reply.resync.reason
                break
            assert reply.ack.seq == seq
            accepted = seq
        else:
            raise AssertionError("the buffer never filled")
        assert _metric(agg, "plumb_store_pending_updates") <= QUEUE_MAX
        assert _metric(agg, "plumb_store_dropped_updates_total") >= 1
        assert agg.node("outage-1")["driver_version"] == f"v{accepted}"

        await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        pg.start()
        until(lambda: agg.get("/readyz").status_code == 200, timeout=30, what="/readyz ready")
        until(lambda: _metric(agg, "plumb_store_pending_updates") == 0, what="buffer drained")
        assert _metric(agg, "plumb_store_healthy") == 1.0

        # Every accepted change landed, in order, once.
        until(lambda: history()[0] == f"v{accepted}", what="the buffered changes")
        assert list(reversed(history())) == [f"v{i}" for i in range(2, accepted + 1)]
        # The agent answers the Resync with its full facts, which now go through.
        full = full_msg(facts)
        full.full_facts.seq = seq
        await call.write(full)
        assert (await call.read()).ack.seq == seq
        until(lambda: history()[0] == f"v{seq}", what="the refused change, resent")
        await call.done_writing()
    assert agg.stop() == 0
