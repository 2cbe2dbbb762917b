"""The aggregator's Kubernetes side as one unit that `plumb serve` starts and stops.

Every replica watches Nodes and discovers the GPU stack's components, so each serves reads
with the cluster's facts merged into its nodes' facts. Only the replica holding the Lease
does cluster-wide writes: the opt-in node labels and conditions, the opt-in cordons of sick
nodes, and validation Jobs (the Kubernetes checks ask `is_leader`). Losing the Lease stops
the writes within the renew deadline; a clean shutdown releases it so another replica takes
over at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from kubernetes import client

from plumb.aggregator.k8s.components import discover
from plumb.aggregator.k8s.lease import LeaderElector, LeaseTiming
from plumb.aggregator.k8s.node_writer import NodeMark, NodeWriter
from plumb.aggregator.k8s.nodes import NodeInfo, NodeWatcher, node_facts
from plumb.aggregator.k8s.remediation import Remediator
from plumb.aggregator.recipes.catalog import Catalog
from plumb.aggregator.settings import AggregatorSettings
from plumb.facts import Reading

log = logging.getLogger(__name__)


class Publish(Protocol):
    """Publishes the cluster's facts of one node (None: of every node), and those that only
    fill the agent's gaps; None clears them (Ingest.set_cluster_facts)."""

    def __call__(
        self,
        name: str | None,
        facts: Mapping[str, Reading] | None,
        fill: Mapping[str, Reading] | None = None,
    ) -> None: ...


# Counts a failed round of one of the loops (watch, discovery, node writes, cordons).
CountError = Callable[[str], None]


class Cluster:
    """Node watcher, component discovery, leader election and the leader's node writes and
    cordons."""

    def __init__(
        self,
        api: client.ApiClient,
        settings: AggregatorSettings,
        catalog: Catalog,
        publish: Publish,
        marks: Callable[[], list[NodeMark]],
        remediator: Remediator,
        count_error: CountError,
    ):
        k = settings.kubernetes
        self.identity = settings.replica.name
        self.elector = LeaderElector(
            api,
            settings.namespace,
            k.lease_name,
            self.identity,
            LeaseTiming(k.lease_duration_s, k.renew_deadline_s, k.retry_period_s),
        )
        self._api = api
        self._settings = k
        self._catalog = catalog
        self._publish = publish
        self._marks = marks
        # Fed every Node; cordons only with remediation.cordon, uncordons on request.
        self.remediator = remediator
        self._count_error = count_error
        self._watcher = NodeWatcher(
            api, self._node_changed, self._node_deleted, canary=settings.gates.canary
        )
        self._writer = NodeWriter(api) if k.write_nodes else None
        # Nodes that exist as Node objects; only those get labels and conditions.
        self.nodes: set[str] = set()

    def is_leader(self) -> bool:
        """Whether this replica holds the Lease now."""
        return self.elector.is_leader.is_set()

    async def run(self) -> None:
        """Until cancelled; cancelling releases the Lease if held."""
        log.info("kubernetes side started", extra={"id": self.identity})
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.elector.run(), name="lease")
            tasks.create_task(self._watcher.run(), name="node-watch")
            tasks.create_task(self._discover_forever(), name="component-discovery")
            if self._writer is not None:
                tasks.create_task(self._write_forever(self._writer), name="node-writes")
            if self.remediator.settings.cordon:
                tasks.create_task(self._cordon_forever(), name="cordons")

    async def _node_changed(self, info: NodeInfo) -> None:
        self.nodes.add(info.name)
        self.remediator.observe(info)
        self._publish(info.name, *node_facts(info))

    async def _node_deleted(self, name: str) -> None:
        self.nodes.discard(name)
        self.remediator.drop(name)
        self._publish(name, None)

    async def _discover_forever(self) -> None:
        while True:
            try:
                facts = await asyncio.to_thread(discover, self._api, self._catalog)
                self._publish(None, facts)
            except Exception:  # noqa: BLE001 - the loop's boundary: log, count, retry next round
                log.warning("component discovery failed", exc_info=True)
                self._count_error("discovery")
            await asyncio.sleep(self._settings.discovery_interval_s)

    async def _write_forever(self, writer: NodeWriter) -> None:
        while True:
            await self.elector.is_leader.wait()
            writer.forget()  # another leader may have written since we last did
            while self.is_leader():
                for mark in writer.pending([m for m in self._marks() if m.name in self.nodes]):
                    if not self.is_leader():
                        break
                    try:
                        await asyncio.to_thread(writer.apply, mark)
                    except Exception:  # noqa: BLE001 - one node's failed write: retried next round
                        log.warning("node write failed", exc_info=True, extra={"node": mark.name})
                        self._count_error("node_write")
                await asyncio.sleep(self._settings.write_interval_s)

    async def _cordon_forever(self) -> None:
        while True:
            await self.elector.is_leader.wait()
            self.remediator.forget()
            while self.is_leader():
                for decision in self.remediator.due():
                    if not self.is_leader():
                        break
                    try:
                        await asyncio.to_thread(self.remediator.cordon, decision)
                    except Exception:  # noqa: BLE001 - one node's failed cordon: retried next round
                        log.warning("cordon failed", exc_info=True, extra={"node": decision.node})
                        self._count_error("cordon")
                await asyncio.sleep(self._settings.write_interval_s)
