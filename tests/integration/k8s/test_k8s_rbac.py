"""RBAC of the applied chart, asked of the real authorizer with SubjectAccessReview."""

from __future__ import annotations

import pytest
from kubernetes import client


def can(
    api, namespace: str, sa: str, verb: str, resource: str, group: str = "", ns=None, name=None
) -> bool:
    """Whether ServiceAccount `sa` of `namespace` may `verb` the resource (in `ns`, the object
    `name` when given)."""
    resource, _, subresource = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{namespace}:{sa}",
            groups=[
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb,
                resource=resource,
                subresource=subresource or None,
                group=group,
                namespace=ns,
                name=name,
            ),
        )
    )
    return client.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed


ALLOWED = [
    ("get", "nodes", "", None),
    ("list", "nodes", "", None),
    ("watch", "nodes", "", None),
    ("create", "tokenreviews", "authentication.k8s.io", None),
    # Agent identity reads the token's pod, in the agents' (release) namespace only.
    ("get", "pods", "", "plumb"),
    ("list", "daemonsets", "apps", None),
    ("list", "deployments", "apps", None),
    # gpu-operator-health and dra-support read the operator's and DRA's objects.
    ("list", "clusterpolicies", "nvidia.com", None),
    ("list", "deviceclasses", "resource.k8s.io", None),
    ("list", "resourceslices", "resource.k8s.io", None),
    # custom-metrics-api: the GPU metric, for pods and nodes (its APIService: below).
    ("get", "pods/DCGM_FI_DEV_GPU_UTIL", "custom.metrics.k8s.io", "gpu-operator"),
    ("get", "nodes/DCGM_FI_DEV_GPU_UTIL", "custom.metrics.k8s.io", None),
    ("get", "leases", "coordination.k8s.io", "plumb"),
    ("create", "leases", "coordination.k8s.io", "plumb"),
    ("update", "leases", "coordination.k8s.io", "plumb"),
    ("create", "jobs", "batch", "plumb"),
    # gpu-scheduling reads its Job and its pod's PodScheduled condition (nodes-ready and
    # gpu-health-monitor need only the cluster-wide node and daemonset lists above).
    ("get", "jobs", "batch", "plumb"),
    ("list", "pods", "", "plumb"),
    ("delete", "jobs", "batch", "plumb"),
    # The two-node NCCL checks' headless Service and ssh key: made and removed, never read.
    ("create", "services", "", "plumb"),
    ("delete", "services", "", "plumb"),
    ("create", "secrets", "", "plumb"),
    ("delete", "secrets", "", "plumb"),
    # gang-scheduling's pods and PodGroup, dra-support's pod and ResourceClaim, in the
    # validation namespace (the release namespace by default).
    ("create", "pods", "", "plumb"),
    ("get", "pods", "", "plumb"),
    ("delete", "pods", "", "plumb"),
    ("create", "podgroups", "scheduling.run.ai", "plumb"),
    ("delete", "podgroups", "scheduling.run.ai", "plumb"),
    ("create", "resourceclaims", "resource.k8s.io", "plumb"),
    ("get", "resourceclaims", "resource.k8s.io", "plumb"),
    ("delete", "resourceclaims", "resource.k8s.io", "plumb"),
]
DENIED = [
    # Node labels and conditions only with aggregator.nodeWrites, off by default (the chart's
    # render tests cover the option).
    ("patch", "nodes", "", None),
    ("patch", "nodes/status", "", None),
    ("get", "pods", "", "gpu-workloads"),
    ("list", "pods", "", None),
    ("get", "secrets", "", "plumb"),
    ("list", "secrets", "", None),
    ("delete", "nodes", "", None),
    ("update", "nodes", "", None),
    ("create", "nodes", "", None),
    ("delete", "pods", "", "gpu-workloads"),
    ("create", "pods", "", "default"),
    ("patch", "pods", "", "plumb"),
    ("create", "leases", "coordination.k8s.io", "kube-system"),
    ("create", "jobs", "batch", "default"),
    ("get", "configmaps", "", "kube-system"),
    ("create", "clusterrolebindings", "rbac.authorization.k8s.io", None),
    ("create", "resourceclaims", "resource.k8s.io", "default"),
    ("create", "podgroups", "scheduling.run.ai", "default"),
    ("list", "resourceclaims", "resource.k8s.io", None),
    # custom-metrics-api reads one metric, not whatever else the adapter serves.
    ("get", "pods/DCGM_FI_DEV_FB_USED", "custom.metrics.k8s.io", "gpu-operator"),
    ("get", "pods", "custom.metrics.k8s.io", "gpu-operator"),
    ("list", "apiservices", "apiregistration.k8s.io", None),
]


@pytest.mark.parametrize(("verb", "resource", "group", "ns"), ALLOWED)
def test_aggregator_may_do_what_it_needs(api, plumb_release, verb, resource, group, ns):
    assert can(api, plumb_release.namespace, "plumb-aggregator", verb, resource, group, ns)


@pytest.mark.parametrize(("verb", "resource", "group", "ns"), DENIED)
def test_aggregator_may_not_do_more(api, plumb_release, verb, resource, group, ns):
    assert not can(api, plumb_release.namespace, "plumb-aggregator", verb, resource, group, ns)


@pytest.mark.parametrize(("verb", "resource", "group", "ns"), ALLOWED + DENIED)
def test_agent_has_no_api_access(api, plumb_release, verb, resource, group, ns):
    assert not can(api, plumb_release.namespace, "plumb-agent", verb, resource, group, ns)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("v1beta1.custom.metrics.k8s.io", True), ("v1beta1.metrics.k8s.io", False)],
)
def test_aggregator_reads_only_the_custom_metrics_apiservice(api, plumb_release, name, allowed):
    sa = "plumb-aggregator"
    group = "apiregistration.k8s.io"
    assert can(api, plumb_release.namespace, sa, "get", "apiservices", group, name=name) is allowed
