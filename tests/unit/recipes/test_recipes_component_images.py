"""recipes/knowledge/component_images.yaml covers the whole registry: each component either has
image rows that give its version as registry.yaml writes it, or is listed `undetected` with why.

The images below are written by hand from NVIDIA/aicr docs/user/container-images.md (the AICR
BOM, v1.x: what each chart renders at the version AICR's registry pins, the same pins as
recipes/registry.yaml), with the registry host each chart uses, so they are the references a
running cluster shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb.aggregator.k8s.components import fact_path, match_image
from plumb.aggregator.recipes import Criteria, RecipeError, load_catalog, resolve
from plumb.aggregator.validation.deployment import DEPLOYMENT
from plumb.facts import Reading

CATALOG = load_catalog()

# image as the chart runs it at registry.yaml's version -> (component, that version)
BOM = [
    ("registry.k8s.io/kueue/kueue:v0.19.3", ("kueue", "0.19.3")),
    ("openpolicyagent/gatekeeper:v3.22.2", ("gatekeeper", "3.22.2")),
    ("ghcr.io/ai-dynamo/grove/grove-operator:v0.1.0-alpha.12", ("grove", "v0.1.0-alpha.12")),
    ("quay.io/jetstack/cert-manager-webhook:v1.20.2", ("cert-manager", "v1.20.2")),
    ("ghcr.io/kai-scheduler/kai-scheduler/scheduler:v0.16.9", ("kai-scheduler", "v0.16.9")),
    ("ghcr.io/nvidia/nvsentinel/gpu-health-monitor:v1.20.0-dcgm-4.x", ("nvsentinel", "v1.20.0")),
    ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0", ("dra-driver", "0.5.0")),
    ("ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.2.0", ("kubeflow-trainer", "2.2.0")),
    ("nvcr.io/nvidia/ai-dynamo/kubernetes-operator:1.4.2", ("dynamo-platform", "1.4.2")),
    ("nvcr.io/nvidia/cloud-native/k8s-nim-operator:v3.1.0", ("k8s-nim-operator", "3.1.0")),
    ("ghcr.io/slinkyproject/slurm-operator-webhook:1.2.0", ("slinky-slurm-operator", "1.2.0")),
    ("ghcr.io/nvidia/topograph:v1.0.0", ("slinky-topograph", "1.0.0")),
    ("ghcr.io/nvidia/cluster-readiness-engine/manager:v0.2.0", ("nvcre", "v0.2.0")),
    (
        "ghcr.io/jmcgrath207/k8s-ephemeral-storage-metrics:1.19.2",
        ("k8s-ephemeral-storage-metrics", "1.19.2"),
    ),
]


def test_every_registry_component_has_image_rows_or_says_why_not():
    with_rows = {r.component for r in CATALOG.component_images}
    undetected = CATALOG.undetected_components
    assert not with_rows & set(undetected)
    missing = set(CATALOG.registry) - with_rows - set(undetected)
    assert not missing, f"no image rows and no `undetected` reason: {sorted(missing)}"
    assert all(reason.strip() for reason in undetected.values())


@pytest.mark.parametrize(("image", "expected"), BOM)
def test_a_charts_image_at_the_pinned_version_gives_the_registry_version(image, expected):
    assert match_image(image, CATALOG.component_images) == expected
    component, version = expected
    assert CATALOG.registry[component].version == version


@pytest.mark.parametrize(
    "image",
    [
        "openpolicyagent/gatekeeper-crds:v3.22.2",  # the CRD hook Job's image, not gatekeeper's
        "registry.k8s.io/jobset/jobset:v0.11.0",  # kubeflow-trainer's JobSet subchart
        "ghcr.io/googlecloudplatform/k8s-aibom@sha256:f8e48d4edc44e6ee8e40a2ac6c5f60b190aa18d4",
        "cr.agentgateway.dev/controller:v1.5.0",
        "ghcr.io/nvidia/nodewright/operator:v0.17.0",
    ],
)
def test_images_whose_tag_is_not_the_components_version_name_no_component(image):
    assert match_image(image, CATALOG.component_images) is None


def test_recipe_components_sees_kueue_and_says_why_nodewright_is_not_visible():
    resolution = resolve(CATALOG, Criteria(service="eks", intent="training", platform="kueue"))
    facts = {fact_path("kueue"): Reading.ok("0.19.3")}
    status, _, details = DEPLOYMENT["recipe-components"](facts, resolution, CATALOG)
    assert status == "pass"
    assert details["kueue"] == "0.19.3: observed 0.19.3"
    assert details["nodewright-operator"].startswith("v0.17.1: not visible to Plumb (chart v0.17.1")


def _images_file(root: Path, text: str) -> None:
    path = root / "knowledge" / "component_images.yaml"
    path.parent.mkdir(parents=True)
    row = "  - {component: kueue, images: [kueue/kueue], source: test}\n"
    path.write_text("kind: ComponentImageTable\nrows:\n" + row + text)


def test_a_component_both_with_rows_and_undetected_is_refused(tmp_path: Path):
    _images_file(tmp_path, "undetected:\n  - {component: kueue, reason: twice}\n")
    with pytest.raises(RecipeError, match="'kueue' is listed twice"):
        load_catalog(data=tmp_path)


def test_an_undetected_entry_must_name_a_registry_component(tmp_path: Path):
    _images_file(tmp_path, "undetected:\n  - {component: kueu, reason: typo}\n")
    with pytest.raises(RecipeError, match="unknown component 'kueu'"):
        load_catalog(data=tmp_path)
