"""Pure parts of the Kubernetes side: image → component version, the Node patches, and how
a Node's facts overlay the agent's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from plumb.aggregator.drift import DriftEngine
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.k8s.components import (
    Found,
    component_facts,
    fact_path,
    from_cluster_policies,
    from_workloads,
    match_image,
    split_image,
)
from plumb.aggregator.k8s.node_writer import (
    Condition,
    NodeMark,
    condition_patch,
    label_patch,
    node_marks,
)
from plumb.aggregator.k8s.nodes import NodeInfo, node_facts
from plumb.aggregator.recipes import ResolutionCache, load_catalog
from plumb.aggregator.settings import RecipeSettings
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.validation.model import CheckResult
from plumb.facts import Reading, content_hash

CATALOG = load_catalog()
ROWS = CATALOG.component_images


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.17.0", ("device-plugin", "v0.17.0")),
        (
            "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
            ("dcgm-exporter", "4.2.3-4.1.3"),
        ),
        (
            "nvcr.io/nvidia/k8s/container-toolkit:v1.17.5-ubuntu20.04",
            ("container-toolkit", "v1.17.5"),
        ),
        ("registry.k8s.io/nfd/node-feature-discovery:v0.17.2", ("nfd", "0.17.2")),
        ("mirror.example:5000/nvidia/gpu-operator:v25.3.0@sha256:ab", ("gpu-operator", "v25.3.0")),
        ("nvcr.io/nvidia/cloud-native/network-operator:v25.1.0", ("network-operator", "25.1.0")),
        ("nvcr.io/nvidia/k8s-device-plugin:latest", None),  # no version in the tag
        ("dcgm-exporter", None),  # another image of the same short name
        ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", None),
    ],
)
def test_images_name_their_component_and_version(image, expected):
    assert match_image(image, ROWS) == expected


def test_split_image_drops_the_registry_host_and_digest():
    assert split_image("localhost:5000/a/b:1.2@sha256:ff") == ("a/b", "1.2")
    assert split_image("nvidia/k8s-device-plugin") == ("nvidia/k8s-device-plugin", "")


def test_running_images_win_over_the_cluster_policy_and_mixed_versions_show_together():
    workloads = [
        {
            "kind": "DaemonSet",
            "metadata": {"namespace": "gpu-operator", "name": name},
            "spec": {"template": {"spec": {"containers": [{"image": image}]}}},
        }
        for name, image in [
            ("dp-old", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
            ("dp-new", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"),
        ]
    ]
    policy = {
        "metadata": {"name": "cluster-policy"},
        "spec": {
            "devicePlugin": {"version": "v0.16.0"},
            "toolkit": {"version": "v1.17.5-ubuntu20.04"},
            "driver": {"version": "570.86.15"},  # the agents report the driver
        },
    }
    found = [*from_workloads(workloads, ROWS), *from_cluster_policies([policy], CATALOG)]
    assert Found("device-plugin", "v0.17.0", "DaemonSet gpu-operator/dp-old") in found
    facts = component_facts(found)
    assert {p: r.value for p, r in facts.items()} == {
        fact_path("container-toolkit"): "v1.17.5",
        fact_path("device-plugin"): "v0.17.0, v0.20.0",
    }


def test_every_discovered_component_has_a_drift_rule_on_its_fact():
    rules = {r.component: r.fact for r in CATALOG.drift.recipe}
    for row in ROWS:
        assert rules.get(row.component) == fact_path(row.component)


MARK = NodeMark(
    "gpu-1",
    {"plumb.dev/recipe": "eks.h100.ubuntu.any.any", "plumb.dev/drift": "none"},
    (Condition("GpuStackDrift", False, "NoDrift", "clean"),),
)


def test_the_label_patch_prunes_only_plumb_labels_it_owned():
    owned = ["plumb.dev/retired", "plumb.dev/drift", "nvidia.com/gpu.present", "team"]
    node = {"metadata": {"annotations": {"plumb.dev/owned-labels": json.dumps(owned)}}}
    patch = label_patch(MARK, node)["metadata"]
    assert patch["labels"] == {
        "plumb.dev/recipe": "eks.h100.ubuntu.any.any",
        "plumb.dev/drift": "none",
        "plumb.dev/retired": None,
    }
    assert json.loads(patch["annotations"]["plumb.dev/owned-labels"]) == [
        "plumb.dev/drift",
        "plumb.dev/recipe",
    ]


def test_a_garbled_ownership_annotation_prunes_nothing():
    node = {"metadata": {"annotations": {"plumb.dev/owned-labels": "not json"}}}
    assert None not in label_patch(MARK, node)["metadata"]["labels"].values()


def test_a_condition_keeps_its_transition_time_until_its_status_changes():
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    before = {
        "type": "GpuStackDrift",
        "status": "False",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    same = condition_patch(MARK, {"status": {"conditions": [before]}}, now)
    assert same["status"]["conditions"][0]["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    assert same["status"]["conditions"][0]["lastHeartbeatTime"] == "2026-01-02T03:04:05Z"
    flipped = condition_patch(MARK, {"status": {"conditions": [{**before, "status": "True"}]}}, now)
    assert flipped["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert flipped["status"]["conditions"][0]["status"] == "False"


def test_the_node_overrides_kubelet_but_only_fills_what_the_host_measures():
    info = NodeInfo(
        "gpu-1",
        facts={
            "host.kubelet_version": "v1.31.2",
            "host.architecture": "amd64",
            "host.kernel": "6.8",
        },
        gpu_labels={"nvidia.com/gpu.present": "true"},
    )
    state = LiveState()
    state.set_cluster_facts("gpu-1", *node_facts(info))
    reported = {
        "host.kubelet_version": Reading.ok("v1.30.0"),
        "host.architecture": Reading.ok("x86_64"),
        "host.kernel": Reading.failed("cannot read osrelease"),
    }
    merged = state.merged("gpu-1", reported)
    assert {p: r.value for p, r in merged.items()} == {
        "host.kubelet_version": "v1.31.2",
        "host.architecture": "x86_64",
        "host.kernel": "6.8",
        "cluster.labels[0].name": "nvidia.com/gpu.present",
        "cluster.labels[0].value": "true",
    }
    state.set_cluster_facts("gpu-1", None)
    assert state.merged("gpu-1", reported) is reported


def test_a_restored_node_with_an_earlier_overlay_is_not_taken_as_its_agents_resend():
    reported = {"host.kubelet_version": Reading.ok("v1.30.0")}
    digest = content_hash(reported)
    state = LiveState()
    # Stored facts are merged facts: the Node's kubelet overrode the agent's before a restart.
    overlaid = state.restore(
        "gpu-1", {"host.kubelet_version": Reading.ok("v1.31.2")}, content_hash=digest
    )
    assert not overlaid.resent_by(digest), "deltas would apply to the overlay, not the report"
    clean = state.restore("gpu-2", reported, content_hash=digest)
    assert clean.resent_by(digest)
    assert not clean.resent_by(content_hash({}))


def _result(node: str, check: str, status: str, severity: str = "critical", message: str = ""):
    return CheckResult(node, check, "conformance", severity, status, message)  # type: ignore[arg-type]


def test_gpu_health_is_fail_on_a_failed_critical_check_and_names_it():
    state = LiveState()
    for name in ("bad", "meh", "ok", "never"):
        state.node(name, datetime(2026, 12, 1, tzinfo=UTC)).connected = True
    evaluator = Evaluator(
        state,
        ResolutionCache(CATALOG),
        RecipeSettings(),
        DriftEngine(CATALOG.drift, lambda: None, xids=CATALOG.xids),
    )
    checks = {
        "bad": [_result("bad", "ecc", "fail", message="2 uncorrected ECC errors on GPU 3"),
                _result("bad", "driver-nvml", "pass")],
        "meh": [_result("meh", "pcie", "fail", severity="warning", message="x8 of x16")],
        "ok": [_result("ok", "ecc", "pass"), _result("ok", "xid", "skip")],
    }  # fmt: skip
    marks = {m.name: m for m in node_marks(state, evaluator, 60, datetime.now(UTC), checks=checks)}
    health = {n: m.labels.get("plumb.dev/gpu-health") for n, m in marks.items()}
    assert health == {"bad": "fail", "meh": "warn", "ok": "pass", "never": None}
    (failed,) = [c for c in marks["bad"].conditions if c.type == "GpuHealthCheckFailed"]
    assert failed == Condition(
        "GpuHealthCheckFailed", True, "ChecksFailed", "ecc fail: 2 uncorrected ECC errors on GPU 3"
    )
    (warned,) = [c for c in marks["meh"].conditions if c.type == "GpuHealthCheckFailed"]
    assert (warned.status, warned.reason) == (False, "ChecksWarned")
    assert not [c for c in marks["never"].conditions if c.type == "GpuHealthCheckFailed"]


def test_validated_stack_is_the_stack_hash_prefix_while_the_checks_passed_at_it():
    state = LiveState()
    node = state.node("gpu-1", datetime(2026, 12, 1, tzinfo=UTC))
    node.connected = True
    node.stack_hash, node.stack_since = "0123456789abcdef" * 4, datetime(2026, 12, 1, tzinfo=UTC)
    evaluator = Evaluator(
        state,
        ResolutionCache(CATALOG),
        RecipeSettings(),
        DriftEngine(CATALOG.drift, lambda: None, xids=CATALOG.xids),
    )
    passed = CheckResult(
        "gpu-1", "ecc", "conformance", "critical", "pass", "",
        finished_at=datetime(2026, 12, 1, 0, 5, tzinfo=UTC),
    )  # fmt: skip
    checks = {"gpu-1": [passed]}
    (mark,) = node_marks(state, evaluator, 60, datetime.now(UTC), checks=checks)
    assert mark.labels["plumb.dev/validated-stack"] == "0123456789abcdef"
    node.stack_since = datetime(2026, 12, 1, 0, 6, tzinfo=UTC)  # a stack fact changed since
    (mark,) = node_marks(state, evaluator, 60, datetime.now(UTC), checks=checks)
    assert "plumb.dev/validated-stack" not in mark.labels
    assert mark.labels["plumb.dev/gpu-health"] == "pass"
