"""custom-metrics-api graded against a stand-in custom metrics API on loopback.

The integration control plane has no prometheus-adapter to aggregate, so the APIService and
the custom.metrics.k8s.io answers come from this stand-in: a real HTTP server answering the
paths the check reads, in bodies written by hand from the Kubernetes API reference (APIGroupList,
APIService of apiregistration.k8s.io/v1, APIResourceList) and the custom metrics API's
MetricValueList (kubernetes/metrics, custom_metrics/v1beta1). The check uses the real
`kubernetes` client against it.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.validation.kubernetes import Kube, run_check

ROOT = Path(__file__).resolve().parents[3]
CHECK = load_catalog().checks.by_id["custom-metrics-api"]
ONCE = CHECK.model_copy(update={"parameters": {**CHECK.parameters, "window_s": 0}})
BASE = "/apis/custom.metrics.k8s.io/v1beta1"
GROUP = {
    "name": "custom.metrics.k8s.io",
    "versions": [{"groupVersion": "custom.metrics.k8s.io/v1beta1", "version": "v1beta1"}],
    "preferredVersion": {"groupVersion": "custom.metrics.k8s.io/v1beta1", "version": "v1beta1"},
}
REFUSED = (
    "failing or missing response from https://10.96.0.12:443/apis/custom.metrics.k8s.io/v1beta1:"
    ' Get "https://10.96.0.12:443/apis/custom.metrics.k8s.io/v1beta1": dial tcp'
    " 10.96.0.12:443: connect: connection refused"
)


def apiservice(status: str, reason: str, message: str) -> dict:
    return {
        "kind": "APIService", "apiVersion": "apiregistration.k8s.io/v1",
        "metadata": {"name": "v1beta1.custom.metrics.k8s.io"},
        "spec": {"service": {"namespace": "monitoring", "name": "prometheus-adapter", "port": 443},
                 "group": "custom.metrics.k8s.io", "version": "v1beta1",
                 "insecureSkipTLSVerify": True, "groupPriorityMinimum": 100,
                 "versionPriority": 100},
        "status": {"conditions": [{"type": "Available", "status": status, "reason": reason,
                                   "message": message,
                                   "lastTransitionTime": "2026-07-01T10:00:00Z"}]},
    }  # fmt: skip


def resource(name: str, namespaced: bool) -> dict:
    return {"name": name, "singularName": "", "namespaced": namespaced,
            "kind": "MetricValueList", "verbs": ["get"]}  # fmt: skip


def values(kind: str, namespace: str | None, name: str, value: str) -> dict:
    described = {"kind": kind, "name": name, "apiVersion": "/v1"}
    if namespace:
        described["namespace"] = namespace
    return {
        "kind": "MetricValueList", "apiVersion": "custom.metrics.k8s.io/v1beta1", "metadata": {},
        "items": [{"describedObject": described, "metricName": "DCGM_FI_DEV_GPU_UTIL",
                   "timestamp": "2026-07-01T10:00:00Z", "value": value, "selector": None}],
    }  # fmt: skip


NOT_FOUND = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "the server could not find the metric DCGM_FI_DEV_GPU_UTIL for pods",
    "reason": "NotFound", "code": 404,
}  # fmt: skip


class StandIn:
    """Paths to the JSON bodies they answer; anything else is a 404 Status."""

    def __init__(self) -> None:
        self.answers: dict[str, dict] = {
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [GROUP]},
            "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.custom.metrics.k8s.io": (
                apiservice("True", "Passed", "all checks passed")
            ),
        }
        self.asked: list[str] = []

    def answer(self, path: str) -> dict | None:
        self.asked.append(path)
        return self.answers.get(path)


@pytest.fixture
def api() -> Iterator[tuple[StandIn, Kube]]:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stand_in = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            path = urllib.parse.unquote(self.path.split("?")[0]).rstrip("/")
            body = stand_in.answer(path)
            data = json.dumps(body if body is not None else NOT_FOUND).encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield stand_in, Kube(client.ApiClient(config), "plumb-validation")
    finally:
        server.shutdown()
        thread.join()


def run(kube: Kube):
    return asyncio.run(run_check(kube, ONCE))


def lists(stand_in: StandIn, *resources: dict) -> None:
    stand_in.answers[BASE] = {
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": "custom.metrics.k8s.io/v1beta1", "resources": list(resources),
    }  # fmt: skip


def test_the_gpu_metric_served_for_the_exporters_pods_passes(api) -> None:
    stand_in, kube = api
    lists(stand_in, resource("pods/DCGM_FI_DEV_GPU_UTIL", True),
          resource("namespaces/DCGM_FI_DEV_GPU_UTIL", False))  # fmt: skip
    stand_in.answers[f"{BASE}/namespaces/gpu-operator/pods/*/DCGM_FI_DEV_GPU_UTIL"] = values(
        "Pod", "gpu-operator", "nvidia-dcgm-exporter-x7k2p", "37"
    )
    status, message, details = run(kube)
    assert (status, message) == (
        "pass",
        "APIService v1beta1.custom.metrics.k8s.io Available; serves DCGM_FI_DEV_GPU_UTIL for pods",
    )
    assert details == {"apiservice": "v1beta1.custom.metrics.k8s.io",
                       "metric.DCGM_FI_DEV_GPU_UTIL": "pods"}  # fmt: skip


def test_a_metric_listed_only_for_nodes_is_read_cluster_wide(api) -> None:
    stand_in, kube = api
    lists(stand_in, resource("nodes/DCGM_FI_DEV_GPU_UTIL", False))
    stand_in.answers[f"{BASE}/nodes/*/DCGM_FI_DEV_GPU_UTIL"] = values(
        "Node", None, "gpu-node-1", "37"
    )
    status, message, _ = run(kube)
    assert status == "pass", message
    assert f"{BASE}/nodes/*/DCGM_FI_DEV_GPU_UTIL" in stand_in.asked
    assert message.endswith("serves DCGM_FI_DEV_GPU_UTIL for nodes")


def test_an_apiservice_not_available_fails_with_its_reason(api) -> None:
    stand_in, kube = api
    path = "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.custom.metrics.k8s.io"
    stand_in.answers[path] = apiservice("False", "FailedDiscoveryCheck", REFUSED)
    status, message, details = run(kube)
    assert status == "fail"
    assert message == (
        "APIService v1beta1.custom.metrics.k8s.io is not Available:"
        f" FailedDiscoveryCheck: {REFUSED}"
    )
    assert details["available"] == f"FailedDiscoveryCheck: {REFUSED}"
    assert BASE not in stand_in.asked  # nothing behind it is asked
    assert CHECK.remediation.startswith("An APIService not Available names its reason")


def test_a_metric_the_adapter_does_not_list_fails_naming_it(api) -> None:
    stand_in, kube = api
    lists(stand_in, resource("pods/DCGM_FI_DEV_FB_USED", True))
    status, message, details = run(kube)
    assert status == "fail"
    assert message == (
        "/apis/custom.metrics.k8s.io/v1beta1 lists no pods or nodes metric named"
        " DCGM_FI_DEV_GPU_UTIL (the adapter's rules do not expose it)"
    )
    assert details["unlisted"] == "DCGM_FI_DEV_GPU_UTIL"


def test_a_listed_metric_without_values_fails_with_the_adapters_answer(api) -> None:
    stand_in, kube = api
    lists(stand_in, resource("pods/DCGM_FI_DEV_GPU_UTIL", True))  # and no values behind it
    status, message, _ = run(kube)
    assert (status, message) == (
        "fail",
        "no values served: DCGM_FI_DEV_GPU_UTIL for pods in gpu-operator: 404 Not Found",
    )


def test_an_empty_value_list_fails(api) -> None:
    stand_in, kube = api
    lists(stand_in, resource("nodes/DCGM_FI_DEV_GPU_UTIL", False))
    empty = values("Node", None, "gpu-node-1", "37") | {"items": []}
    stand_in.answers[f"{BASE}/nodes/*/DCGM_FI_DEV_GPU_UTIL"] = empty
    status, message, _ = run(kube)
    assert (status, message) == (
        "fail",
        "no values served: DCGM_FI_DEV_GPU_UTIL for nodes: no values",
    )


def test_a_server_without_the_group_skips(api) -> None:
    stand_in, kube = api
    stand_in.answers["/apis"] = {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    status, message, _ = run(kube)
    assert (status, message) == (
        "skip",
        "the server does not serve custom.metrics.k8s.io/v1beta1: no custom metrics adapter"
        " installed",
    )


def test_the_chart_may_read_every_metric_the_check_reads() -> None:
    """Least privilege names each metric; the catalog and the chart must agree."""
    rbac = (ROOT / "deploy/helm/plumb/templates/aggregator-rbac.yaml").read_text()
    rule = re.search(r'apiGroups: \["custom\.metrics\.k8s\.io"\]\n\s+resources: \[(.*)\]', rbac)
    assert rule is not None
    granted = {r.strip().strip('"') for r in rule.group(1).split(",")}
    wanted = {
        f"{r}/{m}"
        for r in CHECK.parameters["resources"].split(",")
        for m in CHECK.parameters["metrics"].split(",")
    }
    assert granted == wanted
