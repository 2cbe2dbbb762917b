"""One Kubernetes API client per process: in-cluster, or from a kubeconfig file."""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client, config
from kubernetes.config.incluster_config import SERVICE_HOST_ENV_NAME

from plumb.aggregator.errors import Unavailable


def api_client(kubeconfig: Path | None) -> client.ApiClient:
    """A client from `kubeconfig`, or from the pod's ServiceAccount when it is None."""
    try:
        if kubeconfig is not None:
            return config.new_client_from_config(config_file=str(kubeconfig))
        config.load_incluster_config()
        return client.ApiClient()
    except (config.ConfigException, OSError) as exc:
        where = kubeconfig or "the in-cluster ServiceAccount"
        raise Unavailable(
            f"cannot configure the Kubernetes client from {where}: {exc}",
            hint="run in a pod, or set PLUMB_AUTH__KUBECONFIG",
        ) from exc


def in_cluster() -> bool:
    """Whether this process runs in a pod (the kubelet sets the service host variable)."""
    return bool(os.environ.get(SERVICE_HOST_ENV_NAME))
