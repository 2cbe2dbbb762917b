"""Agent identity against the real API server: TokenReview, then the token's pod's node.

Tokens come from the TokenRequest API, bound to a pod exactly as the kubelet mints the
projected token of the chart's agent pods. The aggregator side runs as the chart's
aggregator ServiceAccount (impersonated), so its RBAC is proven sufficient too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from k8s.conftest import AgentPods
from plumb.aggregator.errors import Forbidden
from plumb.aggregator.k8s import review_token, verify_agent

NAMESPACE = "agents-tr"
SA = "plumb-agent"


@pytest.fixture(scope="module")
def core(api) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def agents(core) -> AgentPods:
    return AgentPods(core, NAMESPACE, SA)


@pytest.fixture(scope="module")
def agent_pods(agents) -> dict[str, client.V1Pod]:
    """Two agent pods, bound straight to nodes tr-node-a and tr-node-b (no scheduler needed)."""
    return {node: agents.pod(f"agent-{node}", node) for node in ("tr-node-a", "tr-node-b")}


@pytest.fixture(scope="module")
def aggregator_api(control_plane, plumb_release) -> Iterator[client.ApiClient]:
    """A client acting as the chart's aggregator ServiceAccount (impersonated by the admin)."""
    api = control_plane.api_client()
    api.set_default_header(
        "Impersonate-User",
        f"system:serviceaccount:{plumb_release.namespace}:plumb-aggregator",
    )
    yield api
    api.close()


async def test_token_for_a_pod_on_node_a_is_accepted_for_node_a(agents, agent_pods, aggregator_api):
    token = agents.token(agent_pods["tr-node-a"])
    await verify_agent(aggregator_api, token, "tr-node-a")


async def test_the_same_token_is_rejected_for_node_b(agents, agent_pods, aggregator_api):
    token = agents.token(agent_pods["tr-node-a"])
    with pytest.raises(Forbidden, match="runs on tr-node-a, not tr-node-b"):
        await verify_agent(aggregator_api, token, "tr-node-b")


async def test_a_garbage_token_is_rejected(agent_pods, aggregator_api):
    with pytest.raises(Forbidden, match="rejected"):
        await verify_agent(aggregator_api, "not.a.token", "tr-node-a")


async def test_an_empty_token_is_rejected(aggregator_api):
    with pytest.raises(Forbidden, match="no agent token"):
        await verify_agent(aggregator_api, "", "tr-node-a")


async def test_a_token_for_another_audience_is_rejected(agents, agent_pods, aggregator_api):
    token = agents.token(agent_pods["tr-node-a"], audience="https://kubernetes.default.svc")
    with pytest.raises(Forbidden, match="rejected"):
        await verify_agent(aggregator_api, token, "tr-node-a")


async def test_a_token_bound_to_no_pod_is_rejected(agents, agent_pods, aggregator_api):
    token = agents.token(None)
    identity = await review_token(aggregator_api, token)
    assert (identity.namespace, identity.service_account, identity.pod_name) == (
        NAMESPACE,
        SA,
        None,
    )
    with pytest.raises(Forbidden, match="not bound to a pod"):
        await verify_agent(aggregator_api, token, "tr-node-a")


async def test_the_token_dies_with_its_pod(core, agents, aggregator_api):
    pod = agents.pod("agent-short-lived", "tr-node-a")
    token = agents.token(pod)
    await verify_agent(aggregator_api, token, "tr-node-a")
    core.delete_namespaced_pod(
        pod.metadata.name, NAMESPACE, body=client.V1DeleteOptions(grace_period_seconds=0)
    )
    with pytest.raises(Forbidden):
        await verify_agent(aggregator_api, token, "tr-node-a")
