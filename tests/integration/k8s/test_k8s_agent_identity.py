"""`plumb serve` in kubernetes auth mode: only a pod of the agent's DaemonSet may report, and
only for the node it runs on (issue 16, row 1).

The attack: any workload on a GPU node can mint a projected token for audience `plumb` (it is
only a volume in its own pod spec). TokenReview accepts it; the aggregator must not.
"""

from __future__ import annotations

import subprocess

import grpc
import pytest
from conftest import BIN, ENV, Aggregator, scrape, until
from kubernetes import client
from test_protocol import hello

from k8s.conftest import AgentDaemonSet, PodTokens
from plumb.v1 import agent_pb2_grpc

NODES = ("id-node-a", "id-node-b")
REFUSED = ("plumb_ingest_streams_closed_by_aggregator_total", {"reason": "forbidden"})


@pytest.fixture(scope="module")
def agents(api, make_node) -> AgentDaemonSet:
    """The agent's DaemonSet, with a pod on each of two GPU nodes."""
    daemonset = AgentDaemonSet(api, "agents-id", "plumb-agent")
    for node in NODES:
        make_node(node, daemonset.node_labels, gpus=8)
    return daemonset


@pytest.fixture(scope="module")
def tokens(agents) -> dict[str, str]:
    """The projected token (audience plumb) of the agent's pod on each node."""
    return {node: agents.token(node) for node in NODES}


@pytest.fixture
def aggregator_k8s(tmp_path, kubeconfig, agents):
    agg = Aggregator(tmp_path, extra_env=agents.serve_env(kubeconfig), start_timeout_s=60).start()
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


def _refused(agg: Aggregator) -> float:
    return sum(v for name, labels, v in scrape(agg) if (name, labels) == REFUSED)


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
    assert _refused(aggregator_k8s) == 2.0


async def test_a_token_of_any_other_workload_on_the_gpu_node_is_refused(
    api, aggregator_k8s, agents, tokens
):
    core = client.CoreV1Api(api)
    # Each mints a valid `plumb` token for its own pod on id-node-a, where the agent runs.
    intruders = {
        # another ServiceAccount in another namespace: the attack of issue 16
        "intruders/miner": PodTokens(core, "intruders", "miner"),
        # another ServiceAccount in the agents' own namespace
        "agents-id/helper": PodTokens(core, "agents-id", "helper"),
        # the agent's ServiceAccount, in a pod the DaemonSet does not own
        "agents-id/plumb-agent": agents.tokens,
    }
    for i, (who, pods) in enumerate(intruders.items()):
        token = pods.token(pods.pod(f"intruder-{i}", "id-node-a"))
        status = await _status(aggregator_k8s, "id-node-a", token)
        assert status == grpc.StatusCode.PERMISSION_DENIED, who
    assert aggregator_k8s.node("id-node-a") is None  # nothing of theirs was taken
    assert _refused(aggregator_k8s) == 3.0
    log = aggregator_k8s.log()
    assert "ServiceAccount intruders/miner is not the agent's (agents-id/plumb-agent)" in log
    assert "ServiceAccount agents-id/helper is not the agent's" in log
    assert "pod agents-id/intruder-2 is not a pod of DaemonSet agents-id/plumb-agent" in log
    # The agent's own pod still reports.
    assert await _status(aggregator_k8s, "id-node-a", tokens["id-node-a"]) == grpc.StatusCode.OK


def test_the_agent_presents_its_token_file(aggregator_k8s, tokens, start_agent, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(tokens["id-node-b"])
    start_agent(aggregator_k8s, "id-node-b", "l4", "--token-file", str(token_file))
    until(lambda: (aggregator_k8s.node("id-node-b") or {}).get("connected"), what="the node")


def test_kubernetes_mode_without_the_agent_daemonset_refuses_to_start(tmp_path, kubeconfig):
    result = subprocess.run(
        [str(BIN / "plumb"), "serve", "--db", f"sqlite:///{tmp_path}/x.db"],
        capture_output=True,
        text=True,
        env={**ENV, "PLUMB_AUTH__MODE": "kubernetes", "PLUMB_AUTH__KUBECONFIG": str(kubeconfig)},
        timeout=60,
    )
    assert result.returncode == 2
    assert "PLUMB_AUTH__AGENT_DAEMONSET" in result.stderr
