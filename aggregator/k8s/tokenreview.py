"""Agent identity: a projected ServiceAccount token, checked by TokenReview, bound to a node.

An agent may only report for the node its pod runs on. The token proves which pod sent it
(the API server puts the bound pod in the user's extra fields); the pod's `spec.nodeName`
then says which node that is. Checking the pod, rather than trusting a node claim in the
token, works on 1.20 as on current Kubernetes (node claims in tokens arrived in 1.30).
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
    *,
    audience: str = AUDIENCE,
    timeout_s: float = TIMEOUT_S,
) -> None:
    """Accept the agent only if its token is valid and its pod runs on `claimed_node`.

    Raises Forbidden on any mismatch (the transport maps it to PERMISSION_DENIED), and
    Unavailable when the API server cannot be asked.
    """
    who = await review_token(api, token, audience=audience, timeout_s=timeout_s)
    if not who.pod_name:
        raise Forbidden(
            "agent token is not bound to a pod",
            hint="mount a projected serviceAccountToken volume, not a long-lived Secret token",
        )
    core = client.CoreV1Api(api)
    try:
        async with asyncio.timeout(timeout_s):
            pod = await asyncio.to_thread(
                core.read_namespaced_pod,
                who.pod_name,
                who.namespace,
                _request_timeout=timeout_s,
            )
    except client.ApiException as exc:
        if exc.status == 404:
            raise Forbidden("the agent token's pod no longer exists") from exc
        raise Unavailable("reading the agent's pod failed") from exc
    except (TimeoutError, OSError) as exc:
        raise Unavailable("reading the agent's pod failed") from exc
    if who.pod_uid and pod.metadata.uid != who.pod_uid:
        raise Forbidden("the agent token's pod was replaced")
    if pod.spec.service_account_name not in (None, who.service_account):
        raise Forbidden("the agent token's ServiceAccount does not run that pod")
    if pod.spec.node_name != claimed_node:
        log.warning(
            "agent node mismatch",
            extra={
                "pod": f"{who.namespace}/{who.pod_name}",
                "claimed": claimed_node,
                "actual": pod.spec.node_name,
            },
        )
        raise Forbidden(
            f"agent pod {who.namespace}/{who.pod_name} runs on "
            f"{pod.spec.node_name or 'no node'}, not {claimed_node}"
        )
