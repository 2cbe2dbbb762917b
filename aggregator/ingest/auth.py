"""Agent identity: who may report for which node.

Three modes, chosen in settings:
- `none`: any agent may report for any node. For the demo and loopback labs only.
- `token`: agents present one shared bearer token; for clusters without Kubernetes identity.
  It proves membership, not which node an agent runs on.
- `kubernetes`: agents present their projected ServiceAccount token (audience `plumb`); a
  TokenReview says which ServiceAccount and pod it belongs to. It counts only for a pod of the
  agent's DaemonSet (namespace, ServiceAccount and controlling DaemonSet as configured), and
  that pod must run on the node reported (aggregator/k8s/tokenreview.py).
Each authenticator raises Forbidden (or Unavailable when it cannot tell); ingest maps those
to PERMISSION_DENIED and UNAVAILABLE and counts them.
"""

from __future__ import annotations

import hmac
import logging
from typing import Protocol

from kubernetes import client

from plumb.aggregator.errors import Forbidden
from plumb.aggregator.k8s import AgentWorkload, api_client, verify_agent
from plumb.aggregator.settings import AuthSettings

log = logging.getLogger(__name__)

__all__ = ["Authenticator", "build_authenticator"]


class Authenticator(Protocol):
    async def check(self, node: str, token: str | None) -> None:
        """Return if the holder of `token` may report for `node`; raise Forbidden if not."""


class AllowAll:
    async def check(self, node: str, token: str | None) -> None:
        return None


class SharedToken:
    def __init__(self, token: str):
        self._token = token.encode()

    async def check(self, node: str, token: str | None) -> None:
        if token is None or not hmac.compare_digest(token.encode(), self._token):
            raise Forbidden(
                "missing or wrong agent token",
                hint="give the agent the aggregator's token (PLUMB_TOKEN or PLUMB_TOKEN_FILE)",
            )


class KubernetesTokens:
    def __init__(self, api: client.ApiClient, audience: str, agent: AgentWorkload):
        self._api = api
        self._audience = audience
        self._agent = agent

    async def check(self, node: str, token: str | None) -> None:
        await verify_agent(self._api, token or "", node, self._agent, audience=self._audience)


def build_authenticator(settings: AuthSettings) -> Authenticator:
    """The authenticator for `settings.mode`."""
    if settings.mode == "token":
        assert settings.token is not None  # AuthSettings validates this
        return SharedToken(settings.token.get_secret_value())
    if settings.mode == "kubernetes":
        ns, sa, ds = (
            settings.agent_namespace,
            settings.agent_service_account,
            settings.agent_daemonset,
        )
        assert ns and sa and ds  # AuthSettings validates these
        agent = AgentWorkload(namespace=ns, service_account=sa, daemonset=ds)
        return KubernetesTokens(api_client(settings.kubeconfig), settings.audience, agent)
    log.warning("agents are not authenticated", extra={"auth_mode": "none"})
    return AllowAll()
