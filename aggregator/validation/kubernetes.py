"""Kubernetes checks: cluster-wide, against the API server, once per run (node "(cluster)").

This module is their door: `KUBERNETES` maps each check id to the coroutine deciding it and
`run_check` runs one within its timeout, turning API and transport errors into an `error`
verdict so the run goes on. The checks live by what they do: workloads.py runs Jobs and pods
(gpu-scheduling, secure-accelerator-access, gang-scheduling, dra-support's claim),
cluster_state.py reads API state (nodes-ready, gpu-health-monitor, gpu-operator-health,
dra-support's ResourceSlices, platform-health), custom_metrics.py asks the custom metrics
API, and nccl_pair.py runs the two-node NCCL checks; kube.py has the client they share. Core
APIs are those of Kubernetes 1.20 (core/v1, apps/v1, batch/v1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kubernetes import client

from plumb.aggregator.recipes.check_catalog import CheckDef
from plumb.aggregator.validation.cluster_state import (
    dra_support,
    gpu_health_monitor,
    gpu_operator_health,
    nodes_ready,
    platform_health,
)
from plumb.aggregator.validation.custom_metrics import custom_metrics_api
from plumb.aggregator.validation.kube import (
    GPU_RESOURCE,
    ClusterRecipe,
    Kube,
    Verdict,
    cluster_recipe,
)
from plumb.aggregator.validation.nccl_pair import NCCL_PAIR, RunNodes
from plumb.aggregator.validation.workloads import (
    gang_scheduling,
    gpu_scheduling,
    secure_accelerator_access,
)

__all__ = [
    "KUBERNETES",
    "GPU_RESOURCE",
    "ClusterRecipe",
    "Kube",
    "Verdict",
    "cluster_recipe",
    "run_check",
]


KUBERNETES: dict[str, Callable[[Kube, CheckDef], Awaitable[Verdict]]] = {
    "gpu-scheduling": gpu_scheduling,
    "gpu-health-monitor": gpu_health_monitor,
    "nodes-ready": nodes_ready,
    "secure-accelerator-access": secure_accelerator_access,
    "gpu-operator-health": gpu_operator_health,
    "dra-support": dra_support,
    "gang-scheduling": gang_scheduling,
    "platform-health": platform_health,
    "custom-metrics-api": custom_metrics_api,
}


async def run_check(kube: Kube, check: CheckDef, nodes: RunNodes | None = None) -> Verdict:
    """One Kubernetes check, bounded by its timeout (plus a little for the Job's cleanup);
    the two-node NCCL checks (nccl_pair.py) also get the run's nodes to choose from."""
    try:
        async with asyncio.timeout(check.timeout_s + 10):
            if check.id in NCCL_PAIR:
                return await NCCL_PAIR[check.id](kube, check, nodes)
            return await KUBERNETES[check.id](kube, check)
    except TimeoutError:
        return "error", f"no answer from the Kubernetes API within {check.timeout_s:g} s", {}
    except client.ApiException as exc:
        return "error", f"Kubernetes API: {exc.status} {exc.reason}", {}
    except Exception as exc:  # urllib3 / TLS errors: the run goes on
        return "error", f"Kubernetes API: {type(exc).__name__}: {exc}", {}
