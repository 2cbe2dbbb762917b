"""Agent identity outside Kubernetes: a shared bearer token, checked before anything else."""

from __future__ import annotations

import subprocess

import grpc
import pytest
from conftest import BIN, ENV, Aggregator, scrape, until
from test_protocol import hello

from plumb.v1 import agent_pb2_grpc

TOKEN = "correct horse battery staple"


@pytest.fixture
def guarded(tmp_path):
    agg = Aggregator(
        tmp_path, extra_env={"PLUMB_AUTH__MODE": "token", "PLUMB_AUTH__TOKEN": TOKEN}
    ).start()
    yield agg
    agg.stop()


def test_an_agent_with_the_token_reports(guarded, start_agent, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    start_agent(guarded, "trusted", "l4", "--token-file", str(token_file))
    until(lambda: (guarded.node("trusted") or {}).get("connected"), what="the node")


async def test_a_wrong_or_missing_token_is_refused_and_counted(guarded):
    async with grpc.aio.insecure_channel(guarded.grpc) as channel:
        for metadata in ((("authorization", "Bearer guess"),), None):
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(metadata=metadata)
            await call.write(hello("intruder"))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call.read()
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert guarded.node("intruder") is None
    assert ("plumb_ingest_streams_closed_by_aggregator_total", {"reason": "forbidden"}, 2.0) in (
        scrape(guarded)
    )


async def test_a_refused_stream_cannot_supersede_a_trusted_one(guarded, start_agent, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    start_agent(guarded, "victim", "l4", "--token-file", str(token_file))
    until(lambda: (guarded.node("victim") or {}).get("connected"), what="the node")
    async with grpc.aio.insecure_channel(guarded.grpc) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(hello("victim"))
        with pytest.raises(grpc.aio.AioRpcError):
            await call.read()
    assert not [
        s for s in scrape(guarded) if s[0] == "plumb_ingest_streams_superseded_total" and s[2] > 0
    ]
    assert guarded.node("victim")["connected"] is True


def test_token_mode_without_a_token_refuses_to_start(tmp_path):
    result = subprocess.run(
        [str(BIN / "plumb"), "serve", "--db", f"sqlite:///{tmp_path}/x.db"],
        capture_output=True,
        text=True,
        env={**ENV, "PLUMB_AUTH__MODE": "token"},
        timeout=60,
    )
    assert result.returncode == 2
    assert "PLUMB_AUTH__TOKEN" in result.stderr
