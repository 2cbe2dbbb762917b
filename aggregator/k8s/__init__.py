"""The aggregator's Kubernetes side: agent identity, the Node watcher, component discovery,
node labels and conditions, opt-in cordons, and leader election, run together by `Cluster`.

Everything here calls the synchronous `kubernetes` client off the event loop (asyncio.to_thread
or a watch thread) and knows nothing of the API, CLI or gRPC layers that use it.
"""

from plumb.aggregator.k8s.client import api_client, in_cluster
from plumb.aggregator.k8s.cluster import Cluster
from plumb.aggregator.k8s.lease import LeaderElector, LeaseTiming
from plumb.aggregator.k8s.node_writer import Condition, NodeMark, node_marks
from plumb.aggregator.k8s.nodes import NodeInfo, NodeWatcher, node_info
from plumb.aggregator.k8s.remediation import Remediator, Uncordoned
from plumb.aggregator.k8s.tokenreview import (
    AgentWorkload,
    TokenIdentity,
    review_token,
    verify_agent,
)

__all__ = [
    "AgentWorkload",
    "Cluster",
    "Condition",
    "LeaderElector",
    "LeaseTiming",
    "NodeMark",
    "NodeInfo",
    "NodeWatcher",
    "Remediator",
    "TokenIdentity",
    "Uncordoned",
    "api_client",
    "in_cluster",
    "node_marks",
    "node_info",
    "review_token",
    "verify_agent",
]
