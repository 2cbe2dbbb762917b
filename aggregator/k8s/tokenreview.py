"""Agent identity: a projected ServiceAccount token, checked by TokenReview, bound to a node.

A token counts only for a pod of the agent's own DaemonSet, and only for the node that pod
runs on. The token proves which ServiceAccount and pod sent it (the API server puts the bound
pod in the user's extra fields): the ServiceAccount and its namespace must be the agent's
(`AgentWorkload`, from settings the chart sets), so any other workload's token is refused
before its pod is even read; the pod, read from the API, must be controlled by the agent's
DaemonSet and its `spec.nodeName` says which node it may report for. Checking the pod, rather
than trusting a node claim in the token, works on 1.20 as on current Kubernetes (node claims
in tokens arrived in 1.30). Every refusal is logged with who asked and why.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from kubernetes import client

from plumb.aggregator.errors import Forbidden, Unavailable

log = logging.getLogger(__name__)

# The audience the chart's projected token is minted for; a token for the API server itself
# (or any other audience) is refused, so a stolen kubectl token cannot pose as an agent.
AUDIENCE = "plumb"
# TokenReview and the pod read are two small calls to the API server; 5 s covers a busy one.
TIMEOUT_S = 5.0
_POD_NAME = "authentication.kubernetes.io/pod-name"
_POD_UID = "authentication.kubernetes.io/pod-uid"
_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class AgentWorkload:
    """The agent's DaemonSet: its namespace, the ServiceAccount its pods run as, its name."""

    namespace: str
    service_account: str
    daemonset: str


@dataclass(frozen=True)
class TokenIdentity:
    """Who a token authenticates as: a ServiceAccount and, for a bound token, its pod."""

    namespace: str
    service_account: str
    pod_name: str | None
    pod_uid: str | None


async def review_token(
    api: client.ApiClient, token: str, *, audience: str = AUDIENCE, timeout_s: float = TIMEOUT_S
) -> TokenIdentity:
    """The ServiceAccount (and pod) a token belongs to, as the API server's TokenReview says.

    Raises Forbidden when the token is empty, invalid, expired, for another audience or not a
    ServiceAccount's; Unavailable when the API server cannot be asked.
    """
    if not token:
        raise Forbidden("no agent token", hint="the agent sends its projected token as metadata")
    review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=[audience]))
    auth = client.AuthenticationV1Api(api)
    try:
        async with asyncio.timeout(timeout_s):
            result = await asyncio.to_thread(
                auth.create_token_review, review, _request_timeout=timeout_s
            )
    except (TimeoutError, client.ApiException, OSError) as exc:
        raise Unavailable("TokenReview failed") from exc
    status = result.status
    if not status or not status.authenticated:
        # status.error names the reason (expired, wrong audience…) and never echoes the token.
        raise Forbidden("agent token rejected", hint=(status.error if status else None))
    if status.audiences is not None and audience not in status.audiences:
        raise Forbidden(f"agent token is not for audience {audience!r}")
    username = status.user.username or ""
    if not username.startswith(_SA_PREFIX) or username.count(":") != 3:
        raise Forbidden("agent token is not a ServiceAccount token")
    namespace, service_account = username[len(_SA_PREFIX) :].split(":")
    extra = status.user.extra or {}
    return TokenIdentity(
        namespace=namespace,
        service_account=service_account,
        pod_name=(extra.get(_POD_NAME) or [None])[0],
        pod_uid=(extra.get(_POD_UID) or [None])[0],
    )


async def verify_agent(
    api: client.ApiClient,
    token: str,
    claimed_node: str,
    agent: AgentWorkload,
    *,
    audience: str = AUDIENCE,
    timeout_s: float = TIMEOUT_S,
) -> None:
    """Accept the agent only if its token is valid, belongs to a pod of `agent`'s DaemonSet
    and that pod runs on `claimed_node`.

    Raises Forbidden on any mismatch (the transport maps it to PERMISSION_DENIED), and
    Unavailable when the API server cannot be asked.
    """
    who = await review_token(api, token, audience=audience, timeout_s=timeout_s)
    sa = f"{who.namespace}/{who.service_account}"
    if (who.namespace, who.service_account) != (agent.namespace, agent.service_account):
        raise _refused(
            f"ServiceAccount {sa} is not the agent's ({agent.namespace}/{agent.service_account})",
            who,
            claimed_node,
            hint="only pods of the agent DaemonSet may report; check PLUMB_AUTH__AGENT_*",
        )
    if not who.pod_name:
        raise _refused(
            "agent token is not bound to a pod",
            who,
            claimed_node,
            hint="mount a projected serviceAccountToken volume, not a long-lived Secret token",
        )
    pod = await _read_pod(api, who.pod_name, who.namespace, timeout_s)
    if pod is None:
        raise _refused("the agent token's pod no longer exists", who, claimed_node)
    if who.pod_uid and pod.metadata.uid != who.pod_uid:
        raise _refused("the agent token's pod was replaced", who, claimed_node)
    if pod.spec.service_account_name != who.service_account:
        raise _refused("the agent token's ServiceAccount does not run that pod", who, claimed_node)
    if not _controlled_by(pod, agent.daemonset):
        raise _refused(
            f"pod {who.namespace}/{who.pod_name} is not a pod of DaemonSet "
            f"{agent.namespace}/{agent.daemonset}",
            who,
            claimed_node,
            hint="only pods of the agent DaemonSet may report",
        )
    if pod.spec.node_name != claimed_node:
        raise _refused(
            f"agent pod {who.namespace}/{who.pod_name} runs on "
            f"{pod.spec.node_name or 'no node'}, not {claimed_node}",
            who,
            claimed_node,
        )


async def _read_pod(
    api: client.ApiClient, name: str, namespace: str, timeout_s: float
) -> client.V1Pod | None:
    """The pod, or None when it is gone; Unavailable when the API server cannot be asked."""
    core = client.CoreV1Api(api)
    try:
        async with asyncio.timeout(timeout_s):
            return await asyncio.to_thread(
                core.read_namespaced_pod, name, namespace, _request_timeout=timeout_s
            )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise Unavailable("reading the agent's pod failed") from exc
    except (TimeoutError, OSError) as exc:
        raise Unavailable("reading the agent's pod failed") from exc


def _controlled_by(pod: client.V1Pod, daemonset: str) -> bool:
    """Whether the pod's controller (the one owner marked so) is DaemonSet `daemonset`."""
    return any(
        ref.controller and ref.kind == "DaemonSet" and ref.name == daemonset
        for ref in pod.metadata.owner_references or ()
    )


def _refused(
    message: str, who: TokenIdentity, claimed_node: str, *, hint: str | None = None
) -> Forbidden:
    """The Forbidden for a refused agent, logged with who it was and what it claimed."""
    log.warning(
        "agent refused",
        extra={
            "why": message,
            "service_account": f"{who.namespace}/{who.service_account}",
            "pod": who.pod_name,
            "claimed_node": claimed_node,
        },
    )
    return Forbidden(message, hint=hint)
