"""The aggregator's Kubernetes side: agent identity, the Node watcher and leader election.

Everything here calls the synchronous `kubernetes` client off the event loop (asyncio.to_thread
or a watch thread) and knows nothing of the API, CLI or gRPC layers that use it.
"""

from aggregator.k8s.client import api_client, in_cluster
from aggregator.k8s.lease import LeaderElector, LeaseTiming
from aggregator.k8s.nodes import NodeInfo, NodeWatcher, node_info
from aggregator.k8s.tokenreview import TokenIdentity, review_token, verify_agent

__all__ = [
    "LeaderElector",
    "LeaseTiming",
    "NodeInfo",
    "NodeWatcher",
    "TokenIdentity",
    "api_client",
    "in_cluster",
    "node_info",
    "review_token",
    "verify_agent",
]
