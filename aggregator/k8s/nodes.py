"""The Node objects' side of each node's facts, kept current by a list-and-watch.

The agent sees the host; only the API server knows the node's cloud identity, the kubelet
and container runtime it reports, and the labels GFD and NFD put on it. `node_info` turns a
Node into flat facts named like the agent's (`host.kubelet_version`, …) so the aggregator
merges them into the same NodeFacts; `NodeWatcher` calls back with each changed NodeInfo,
so a label or kubelet change reaches the facts within a second. Kubelet heartbeats, which
update the Node every ten seconds without changing any of this, are not passed on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, watch

from plumb.aggregator.gates import CANARY_FACT
from plumb.facts import Reading

log = logging.getLogger(__name__)

# Labels that describe the node's GPUs and are worth carrying into its facts. Plumb reads
# these; it never writes them (GFD, the GPU Operator and NFD own and prune them).
GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de")
# Current well-known labels first, then the beta ones 1.20-era clusters still carry.
_REGION = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
_ZONE = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
_INSTANCE_TYPE = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
# Plumb's remediation marks (aggregator/k8s/remediation.py): which findings it cordoned the
# node for, and which a person uncordoned it past.
CORDONED_BY = "plumb.dev/cordoned-by"
UNCORDONED_BY = "plumb.dev/uncordoned-by"


@dataclass(frozen=True)
class NodeInfo:
    """What the Node object says about a node: flat facts, its GPU labels, whether it is
    cordoned, with Plumb's remediation annotations, and whether it carries the canary label
    of the rollout gates (settings.gates.canary_label)."""

    name: str
    facts: dict[str, str] = field(default_factory=dict)
    gpu_labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    remediation: dict[str, str] = field(default_factory=dict)
    canary: bool = False


def _first(labels: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    return next((labels[k] for k in keys if labels.get(k)), None)


def node_info(node: Mapping[str, Any], canary: tuple[str, str] | None = None) -> NodeInfo:
    """NodeInfo of a Node given as its JSON dict (camelCase keys, as the API serves it);
    `canary` is the (key, value) label that makes it a canary."""
    meta = node.get("metadata") or {}
    labels: dict[str, str] = meta.get("labels") or {}
    spec = node.get("spec") or {}
    info = (node.get("status") or {}).get("nodeInfo") or {}
    runtime = info.get("containerRuntimeVersion") or ""
    runtime_name, _, runtime_version = runtime.partition("://")
    provider_id = spec.get("providerID") or ""
    candidates = {
        "host.kubelet_version": info.get("kubeletVersion"),
        "host.container_runtime": runtime_name or None,
        "host.container_runtime_version": runtime_version or None,
        "host.kernel": info.get("kernelVersion"),
        "host.os_pretty_name": info.get("osImage"),
        "host.architecture": info.get("architecture"),
        "host.boot_id": info.get("bootID"),
        # The provider id's scheme ("aws", "gce", "azure", "kind"…); recipes/criteria.yaml
        # maps it to a service.
        "host.cloud_provider": provider_id.partition("://")[0] if "://" in provider_id else None,
        "host.instance_type": _first(labels, _INSTANCE_TYPE),
        "host.region": _first(labels, _REGION),
        "host.zone": _first(labels, _ZONE),
    }
    return NodeInfo(
        name=meta.get("name", ""),
        facts={k: v for k, v in candidates.items() if v},
        gpu_labels={k: v for k, v in labels.items() if k.startswith(GPU_LABEL_PREFIXES)},
        unschedulable=bool(spec.get("unschedulable")),
        remediation={
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k in (CORDONED_BY, UNCORDONED_BY)
        },
        canary=canary is not None and labels.get(canary[0]) == canary[1],
    )


# The agent reads these from the host itself (the Node says `amd64` where the host says
# `x86_64`); the Node's copy only fills in where the agent has none.
HOST_MEASURED = frozenset(
    {"host.kernel", "host.architecture", "host.boot_id", "host.os_pretty_name"}
)


def node_facts(info: NodeInfo) -> tuple[dict[str, Reading], dict[str, Reading]]:
    """(facts, fill) a NodeInfo adds to the node's: its flat facts, its GPU labels sorted by
    name as `cluster.labels[i].name` / `.value` (label names are not fact path segments),
    `cluster.canary` on a canary, and apart the HOST_MEASURED facts, which only fill the
    agent's gaps."""
    facts = {path: Reading.ok(value) for path, value in info.facts.items()}
    if info.canary:
        facts[CANARY_FACT] = Reading.ok(True)
    fill = {path: facts.pop(path) for path in HOST_MEASURED & facts.keys()}
    for i, (label, value) in enumerate(sorted(info.gpu_labels.items())):
        facts[f"cluster.labels[{i}].name"] = Reading.ok(label)
        facts[f"cluster.labels[{i}].value"] = Reading.ok(value)
    return facts, fill


OnChange = Callable[[NodeInfo], Awaitable[None]]
# How long stopping waits for the watch thread to notice.
_JOIN_S = 1.0
OnDelete = Callable[[str], Awaitable[None]]


class NodeWatcher:
    """Lists and watches Nodes in a thread; awaits `on_change`/`on_delete` on the loop, in order."""

    def __init__(
        self,
        api: client.ApiClient,
        on_change: OnChange,
        on_delete: OnDelete,
        *,
        read_timeout_s: float = 30.0,
        queue_max: int = 10_000,
        canary: tuple[str, str] | None = None,
    ):
        self._core = client.CoreV1Api(api)
        self._canary = canary
        self._on_change = on_change
        self._on_delete = on_delete
        # A silent watch is re-opened this often.
        self._read_timeout_s = read_timeout_s
        self._queue_max = queue_max
        self._known: dict[str, NodeInfo] = {}
        self._stop = threading.Event()

    async def run(self) -> None:
        """Until cancelled: feed changes to the callbacks. The first list delivers every node."""
        loop = asyncio.get_running_loop()
        # Bounded: a full queue blocks the watch thread (the API server buffers), never memory.
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=self._queue_max)

        def put(item: tuple[str, Any]) -> None:
            pending = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
            while True:
                try:
                    return pending.result(timeout=0.5)
                except concurrent.futures.TimeoutError:
                    if self._stop.is_set():
                        pending.cancel()
                        raise RuntimeError("node watcher stopped") from None

        self._stop.clear()
        thread = threading.Thread(target=self._watch, args=(put,), name="node-watch", daemon=True)
        thread.start()
        try:
            while True:
                kind, payload = await queue.get()
                if kind == "change":
                    await self._on_change(payload)
                else:
                    await self._on_delete(payload)
        finally:
            self._stop.set()
            # The thread may sit in a silent watch until its read timeout; it is a daemon that
            # returns at its next event, so shutdown (and the Lease's release) never waits on it.
            await asyncio.to_thread(thread.join, _JOIN_S)

    def _emit(self, put: Callable[[tuple[str, Any]], None], node: Mapping[str, Any]) -> None:
        info = node_info(node, self._canary)
        if self._known.get(info.name) != info:
            self._known[info.name] = info
            put(("change", info))

    def _watch(self, put: Callable[[tuple[str, Any]], None]) -> None:
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist(put)
                stream = watch.Watch().stream(
                    self._core.list_node,
                    resource_version=resource_version,
                    timeout_seconds=max(1, int(self._read_timeout_s)),
                    _request_timeout=self._read_timeout_s + 5,
                )
                for event in stream:
                    if self._stop.is_set():
                        return
                    obj = event["raw_object"]
                    if event["type"] == "ERROR":
                        resource_version = None  # 410 Gone: our version is too old; relist
                        break
                    resource_version = obj["metadata"]["resourceVersion"]
                    if event["type"] == "DELETED":
                        name = obj["metadata"]["name"]
                        if self._known.pop(name, None) is not None:
                            put(("delete", name))
                    else:
                        self._emit(put, obj)
            except client.ApiException as exc:
                if exc.status == 410:
                    resource_version = None
                    continue
                log.warning("node watch failed", extra={"status": exc.status})
                self._stop.wait(1.0)
            except Exception:  # noqa: BLE001 - the watch thread's boundary: log, back off, retry
                if self._stop.is_set():
                    return
                log.warning("node watch failed", exc_info=True)
                self._stop.wait(1.0)

    def _relist(self, put: Callable[[tuple[str, Any]], None]) -> str:
        """Every node now; nodes that vanished while not watching are reported deleted."""
        response = self._core.list_node(_preload_content=False, _request_timeout=30)
        body = json.loads(response.data)
        seen = set()
        for node in body["items"]:
            seen.add(node["metadata"]["name"])
            self._emit(put, node)
        for name in set(self._known) - seen:
            del self._known[name]
            put(("delete", name))
        return body["metadata"]["resourceVersion"]
