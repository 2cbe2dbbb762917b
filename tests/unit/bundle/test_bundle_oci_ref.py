"""oci:// references, and the chart a bundle becomes for them: parsed, or refused saying why."""

from __future__ import annotations

import pytest
import yaml

from plumb.aggregator.bundle import BundleError, BundleOptions, OciRef


@pytest.mark.parametrize(
    ("text", "base", "name", "version"),
    [
        ("oci://127.0.0.1:5000/plumb/gpu-stack:1.2.0", "127.0.0.1:5000/plumb", "gpu-stack",
         "1.2.0"),
        ("oci://registry.example.com/gpu-stack:0.1.0-rc.1", "registry.example.com", "gpu-stack",
         "0.1.0-rc.1"),
        ("oci://reg.example.com/a/b/c/stack:10.0.3", "reg.example.com/a/b/c", "stack", "10.0.3"),
    ],
)  # fmt: skip
def test_a_reference_names_the_push_target_chart_and_version(text, base, name, version):
    ref = OciRef.parse(text)
    assert (ref.base, ref.name, ref.version) == (base, name, version)
    assert str(ref) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("oci://reg.example.com/gpu-stack", "has no version tag"),
        ("oci://reg.example.com/GPU:1.0.0", "not a Helm chart name"),
        ("oci://reg.example.com/gpu-stack:1.0", "is not SemVer"),
        ("oci://reg.example.com/gpu-stack:1.0.0+build.5", "is not SemVer"),  # no '+' in a tag
        ("oci://gpu-stack:1.0.0", "is not oci://REGISTRY/NAME:VERSION"),
        ("https://reg.example.com/gpu-stack:1.0.0", "is not oci://REGISTRY/NAME:VERSION"),
    ],
)
def test_a_bad_reference_is_refused_saying_why(text, message):
    with pytest.raises(BundleError, match=message):
        OciRef.parse(text)


def test_a_chart_option_adds_a_library_chart_yaml_covered_by_the_checksums(make_bundle):
    bundle = make_bundle("eks-h100-training", "helm", chart=("gpu-stack", "1.2.0"))
    chart = yaml.safe_load(bundle.files["Chart.yaml"])
    assert chart == {
        "apiVersion": "v2",
        "name": "gpu-stack",
        "description": "A Plumb GPU stack bundle (helm); see README.md to apply",
        "type": "library",
        "version": "1.2.0",
    }
    assert b"  Chart.yaml\n" in bundle.files["checksums.txt"]
    assert "Chart.yaml" not in make_bundle("eks-h100-training", "helm").files


def test_argocd_helm_takes_the_chart_name_and_version(make_bundle):
    bundle = make_bundle("eks-h100-training", "argocd-helm", chart=("gpu-apps", "0.3.0"))
    chart = yaml.safe_load(bundle.files["Chart.yaml"])
    assert (chart["name"], chart["version"], chart["type"]) == ("gpu-apps", "0.3.0", "application")
    default = yaml.safe_load(make_bundle("eks-h100-training", "argocd-helm").files["Chart.yaml"])
    assert (default["name"], default["version"]) == ("plumb-gpu-stack", "0.1.0")


@pytest.mark.parametrize("chart", [("GPU", "1.0.0"), ("gpu-stack", "latest")])
def test_a_bad_chart_option_is_refused(chart):
    with pytest.raises(BundleError, match="expected a Helm chart name and a SemVer version"):
        BundleOptions.parse(chart=chart)
