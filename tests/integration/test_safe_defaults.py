"""`plumb serve`'s defaults for agents (issue 16, row 3): loopback only while agents are not
authenticated, and a cap on how fast names never seen before may appear.

Before, `plumb serve` listened on 0.0.0.0 with auth none, and one client registered 50,000
node names with no refusal.
"""

from __future__ import annotations

import subprocess

import grpc
import httpx
import pytest
from conftest import BIN, ENV, Aggregator, scrape, stop, until
from ports import free_port
from test_ingest_limits import absent
from test_protocol import FACTS, full, hello, open_stream

from plumb.v1 import agent_pb2_grpc


def _serve(tmp_path, http: int, *args: str) -> list[str]:
    return [
        str(BIN / "plumb"), "serve", "--http-listen", f"127.0.0.1:{http}",
        "--db", f"sqlite:///{tmp_path / 'plumb.db'}", *args,
    ]  # fmt: skip


def test_unauthenticated_agents_on_every_address_are_refused_at_start(tmp_path):
    argv = _serve(tmp_path, free_port(), "--grpc-listen", f"0.0.0.0:{free_port()}")
    result = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=60)
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said  # invalid_input (aggregator/errors.py STATUS)
    assert "agents are not authenticated (auth mode none)" in said
    assert "--insecure-agents on a trusted network" in said


def test_insecure_agents_says_so_explicitly_and_then_serves(tmp_path):
    http = free_port()
    argv = _serve(tmp_path, http, "--insecure-agents", "--grpc-listen", f"0.0.0.0:{free_port()}")
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV)
    try:
        until(
            lambda: httpx.get(f"http://127.0.0.1:{http}/healthz", timeout=2).status_code == 200,
            what="/healthz",
        )
        assert proc.poll() is None
    finally:
        assert stop(proc) == 0


@pytest.fixture
def capped(tmp_path):
    agg = Aggregator(tmp_path, extra_env={"PLUMB_INGEST__MAX_NEW_NODES_PER_MINUTE": "3"}).start()
    yield agg
    agg.stop()


async def test_new_node_names_past_the_cap_are_refused_known_ones_are_not(capped):
    async with grpc.aio.insecure_channel(capped.grpc) as channel:
        for n in range(3):
            call = await open_stream(channel, f"new-{n}")
            await call.write(full(FACTS))
            assert (await call.read()).ack.seq == 1
            call.cancel()
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(hello("new-3"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call.read()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "more than 3 new node names a minute" in err.value.details()
        assert "PLUMB_INGEST__MAX_NEW_NODES_PER_MINUTE" in err.value.details()
        # A node the aggregator holds reconnects whatever the budget.
        until(lambda: capped.node("new-0") and not capped.node("new-0")["connected"])
        again = await open_stream(channel, "new-0")
        again.cancel()
    sample = ("plumb_ingest_streams_closed_by_aggregator_total", {"reason": "new_node_rate"}, 1.0)
    assert sample in scrape(capped)
    assert absent(capped, "new-3")
