"""custom-metrics-api against the real kube-apiserver: the group's absence, and an APIService
the apiserver's own availability controller judges.

No prometheus-adapter can run here (no kubelet), so the served-and-Available paths are the
unit tests' stand-in (tests/unit/validation/test_custom_metrics_api.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kubernetes import client

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.validation.kubernetes import Kube, run_check

from .conftest import until

CHECK = load_catalog().checks.by_id["custom-metrics-api"]
ONCE = CHECK.model_copy(update={"parameters": {**CHECK.parameters, "window_s": 0}})
APISERVICE = "v1beta1.custom.metrics.k8s.io"


def run(api: client.ApiClient):
    return asyncio.run(run_check(Kube(api, "plumb-validation"), ONCE))


def test_a_server_without_custom_metrics_skips(api) -> None:
    status, message, details = run(api)
    assert (status, message, details) == (
        "skip",
        "the server does not serve custom.metrics.k8s.io/v1beta1: no custom metrics adapter"
        " installed",
        {},
    )


@pytest.fixture
def adapter_without_service(api: client.ApiClient) -> Iterator[None]:
    """prometheus-adapter's APIService as its chart registers it, with no Service behind it
    (the adapter's release gone, its APIService left): deleted afterwards, so discovery for
    the other tests is whole again."""
    registration = client.ApiregistrationV1Api(api)
    registration.create_api_service(
        client.V1APIService(
            metadata=client.V1ObjectMeta(name=APISERVICE),
            spec=client.V1APIServiceSpec(
                group="custom.metrics.k8s.io",
                version="v1beta1",
                service=client.ApiregistrationV1ServiceReference(
                    namespace="monitoring", name="prometheus-adapter", port=443
                ),
                insecure_skip_tls_verify=True,
                group_priority_minimum=100,
                version_priority=100,
            ),
        )
    )
    try:
        yield
    finally:
        registration.delete_api_service(APISERVICE)
        until(
            lambda: all(g.name != "custom.metrics.k8s.io" for g in _groups(api)),
            what="custom.metrics.k8s.io gone from discovery",
        )


def _groups(api: client.ApiClient) -> list:
    return client.ApisApi(api).get_api_versions().groups


def test_an_apiservice_without_its_service_fails_with_the_apiservers_reason(
    api, adapter_without_service
) -> None:
    registration = client.ApiregistrationV1Api(api)

    def judged() -> bool:
        conditions = registration.read_api_service(APISERVICE).status.conditions or ()
        return any(c.type == "Available" and c.reason for c in conditions)

    until(judged, what="the availability controller's verdict")
    status, message, details = run(api)
    assert status == "fail"
    # kube-aggregator's availability controller: reason ServiceNotFound, message
    # `service/<name> in "<namespace>" is not present`.
    assert message == (
        "APIService v1beta1.custom.metrics.k8s.io is not Available: ServiceNotFound:"
        ' service/prometheus-adapter in "monitoring" is not present'
    )
    assert details["apiservice"] == APISERVICE
