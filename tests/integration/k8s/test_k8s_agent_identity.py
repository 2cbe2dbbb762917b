"""`plumb serve` in kubernetes auth mode: an agent may only report for its own pod's node."""

from __future__ import annotations

import grpc
import pytest
from conftest import Aggregator, scrape, until
from kubernetes import client
from test_protocol import hello

from k8s.conftest import AgentPods
from plumb.v1 import agent_pb2_grpc

NAMESPACE = "agents-id"
SA = "plumb-agent"
NODES = ("id-node-a", "id-node-b")


@pytest.fixture(scope="module")
def tokens(api) -> dict[str, str]:
    """A projected-style token (audience plumb) for an agent pod on each of two nodes."""
    agents = AgentPods(client.CoreV1Api(api), NAMESPACE, SA)
    return {node: agents.token(agents.pod(f"agent-{node}", node)) for node in NODES}


@pytest.fixture
def aggregator_k8s(tmp_path, kubeconfig):
    agg = Aggregator(
        tmp_path,
        extra_env={"PLUMB_AUTH__MODE": "kubernetes", "PLUMB_AUTH__KUBECONFIG": str(kubeconfig)},
        start_timeout_s=60,
    ).start()
    yield agg
    agg.stop()


async def _status(agg: Aggregator, node: str, token: str) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(agg.grpc) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(
            metadata=(("authorization", f"Bearer {token}"),)
        )
        await call.write(hello(node))
        try:
            msg = await call.read()
        except grpc.aio.AioRpcError as err:
            return err.code()
        assert msg.WhichOneof("message") == "welcome"
        call.cancel()
        return grpc.StatusCode.OK


async def test_an_agent_may_report_only_for_its_own_node(aggregator_k8s, tokens):
    assert await _status(aggregator_k8s, "id-node-a", tokens["id-node-a"]) == grpc.StatusCode.OK
    assert (
        await _status(aggregator_k8s, "id-node-b", tokens["id-node-a"])
        == grpc.StatusCode.PERMISSION_DENIED
    )
    assert (
        await _status(aggregator_k8s, "id-node-a", "not-a-token")
        == grpc.StatusCode.PERMISSION_DENIED
    )
    assert ("plumb_ingest_streams_closed_by_aggregator_total", {"reason": "forbidden"}, 2.0) in (
        scrape(aggregator_k8s)
    )


def test_the_agent_presents_its_token_file(aggregator_k8s, tokens, start_agent, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(tokens["id-node-b"])
    start_agent(aggregator_k8s, "id-node-b", "l4", "--token-file", str(token_file))
    until(lambda: (aggregator_k8s.node("id-node-b") or {}).get("connected"), what="the node")
