"""Agent identity against the real API server: TokenReview, the token's pod, its DaemonSet
and its node.

Tokens come from the TokenRequest API, bound to a pod exactly as the kubelet mints the
projected token of the chart's agent pods; the agent's pods are made by a real DaemonSet in the
chart's release namespace. The aggregator side runs as the chart's aggregator ServiceAccount
(impersonated), so its RBAC (pods get in the release namespace only) is proven sufficient too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from k8s.conftest import AgentDaemonSet, PodTokens
from plumb.aggregator.errors import Forbidden
from plumb.aggregator.k8s import review_token, verify_agent

NODES = ("tr-node-a", "tr-node-b", "tr-node-c")


@pytest.fixture(scope="module")
def core(api) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def agents(api, make_node, plumb_release) -> AgentDaemonSet:
    """A DaemonSet of the chart's agent ServiceAccount in the release namespace, on three
    nodes."""
    daemonset = AgentDaemonSet(api, plumb_release.namespace, "tr-agent")
    for node in NODES:
        make_node(node, daemonset.node_labels, gpus=8)
    return daemonset


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


async def test_token_for_a_pod_on_node_a_is_accepted_for_node_a(agents, aggregator_api):
    await verify_agent(aggregator_api, agents.token("tr-node-a"), "tr-node-a", agents.workload)


async def test_the_same_token_is_rejected_for_node_b(agents, aggregator_api):
    with pytest.raises(Forbidden, match="runs on tr-node-a, not tr-node-b"):
        await verify_agent(aggregator_api, agents.token("tr-node-a"), "tr-node-b", agents.workload)


async def test_a_garbage_token_is_rejected(agents, aggregator_api):
    with pytest.raises(Forbidden, match="rejected"):
        await verify_agent(aggregator_api, "not.a.token", "tr-node-a", agents.workload)


async def test_an_empty_token_is_rejected(agents, aggregator_api):
    with pytest.raises(Forbidden, match="no agent token"):
        await verify_agent(aggregator_api, "", "tr-node-a", agents.workload)


async def test_a_token_for_another_audience_is_rejected(agents, aggregator_api):
    token = agents.tokens.token(agents.pod("tr-node-a"), audience="https://kubernetes.default.svc")
    with pytest.raises(Forbidden, match="rejected"):
        await verify_agent(aggregator_api, token, "tr-node-a", agents.workload)


async def test_a_token_bound_to_no_pod_is_rejected(agents, aggregator_api):
    token = agents.tokens.token(None)
    identity = await review_token(aggregator_api, token)
    assert (identity.namespace, identity.service_account, identity.pod_name) == (
        "plumb",
        "plumb-agent",
        None,
    )
    with pytest.raises(Forbidden, match="not bound to a pod"):
        await verify_agent(aggregator_api, token, "tr-node-a", agents.workload)


async def test_a_pod_of_another_service_account_elsewhere_is_refused_unread(
    core, agents, aggregator_api
):
    # The chart's RBAC reads pods in the release namespace only: refused before any read.
    pods = PodTokens(core, "tr-intruders", "miner")
    token = pods.token(pods.pod("miner", "tr-node-a"))
    with pytest.raises(Forbidden, match="ServiceAccount tr-intruders/miner is not the agent's"):
        await verify_agent(aggregator_api, token, "tr-node-a", agents.workload)


async def test_a_pod_of_the_agent_service_account_outside_its_daemonset_is_refused(
    agents, aggregator_api
):
    token = agents.tokens.token(agents.tokens.pod("tr-stray", "tr-node-a"))
    with pytest.raises(Forbidden, match="tr-stray is not a pod of DaemonSet plumb/tr-agent"):
        await verify_agent(aggregator_api, token, "tr-node-a", agents.workload)


async def test_the_token_dies_with_its_pod(core, agents, aggregator_api):
    pod = agents.pod("tr-node-c")
    token = agents.tokens.token(pod)
    await verify_agent(aggregator_api, token, "tr-node-c", agents.workload)
    core.delete_namespaced_pod(
        pod.metadata.name, agents.namespace, body=client.V1DeleteOptions(grace_period_seconds=0)
    )
    with pytest.raises(Forbidden):
        await verify_agent(aggregator_api, token, "tr-node-c", agents.workload)
