"""Options and bad input: overrides, placement at registry paths, clear errors."""

from __future__ import annotations

from itertools import pairwise

import pytest
import yaml

from plumb.aggregator.bundle import BundleError, BundleOptions, build, parse_recipe
from plumb.aggregator.errors import InvalidInput, TooLarge


def values(bundle, component: str) -> dict:
    path = next(p for p in bundle.files if p.endswith(f"-{component}/values.yaml"))
    return yaml.safe_load(bundle.files[path])


def test_unknown_deployer_is_rejected_naming_the_known_ones():
    known = "known: argocd, argocd-helm, flux"
    with pytest.raises(BundleError, match=f"unknown deployer 'kustomize'; {known}"):
        BundleOptions.parse("kustomize")


def test_set_path_missing_for_the_component_is_rejected(make_bundle):
    with pytest.raises(BundleError, match="gpu-operator has no value 'mig.stratgy'") as info:
        make_bundle(set=["gpu-operator:mig.stratgy=single"])
    assert "strategy" in (info.value.hint or "")


def test_set_on_a_component_not_in_the_recipe_is_rejected(make_bundle):
    with pytest.raises(BundleError, match="'aws-efa' is not in this recipe"):
        make_bundle(set=["aws-efa:nodeSelector.x=y"])


@pytest.mark.parametrize("text", ["gpu-operator", "gpu-operator:=x", "gpu-operator:a..b=1"])
def test_malformed_set_is_rejected(text):
    with pytest.raises(BundleError, match="--set"):
        BundleOptions.parse(set=[text])


def test_set_keeps_the_type_of_the_value_it_replaces(make_bundle):
    bundle = make_bundle(set=["gpu-operator:cdi.enabled=false", "gpu-operator:mig.strategy=1.20"])
    got = values(bundle, "gpu-operator")
    assert got["cdi"]["enabled"] is False and got["mig"]["strategy"] == "1.20"
    with pytest.raises(BundleError, match="not a bool"):
        make_bundle(set=["gpu-operator:cdi.enabled=maybe"])
    with pytest.raises(BundleError, match="not a single value"):
        make_bundle(set=["gpu-operator:mig=single"])


def test_set_on_an_operand_lands_in_its_parent_chart(make_bundle):
    bundle = make_bundle(set=["container-toolkit:version=v1.20.1"])
    assert values(bundle, "gpu-operator")["toolkit"]["version"] == "v1.20.1"


def test_operand_values_merge_into_the_parent_chart(make_bundle):
    got = values(make_bundle(), "gpu-operator")
    assert got["toolkit"]["env"] == {"RUNTIME_CONFIG_SOURCE": "file"}


def test_placement_goes_to_the_paths_the_registry_declares(make_bundle, catalog):
    bundle = make_bundle(
        system_node_selector=["node-role.kubernetes.io/system=true"],
        system_tolerations=["dedicated=system:NoSchedule"],
        accelerated_node_selector=["nvidia.com/gpu.present=true"],
        accelerated_tolerations=["nvidia.com/gpu:NoSchedule"],
    )
    gpu_toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    op = values(bundle, "gpu-operator")
    assert op["operator"]["nodeSelector"] == {"node-role.kubernetes.io/system": "true"}
    assert op["daemonsets"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert op["daemonsets"]["tolerations"] == [gpu_toleration]
    nfd = values(bundle, "nfd")
    assert nfd["worker"] == {"tolerations": [gpu_toleration]}  # no selector: runs on every node
    assert nfd["master"]["tolerations"][0]["value"] == "system"
    installer = values(bundle, "gcp-driver-installer")
    assert installer["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "nodeSelector" not in values(bundle, "kubeflow-trainer")


@pytest.mark.parametrize("text", ["nvidia.com/gpu:Sometimes", "=x", "a=:NoSchedule"])
def test_malformed_toleration_is_rejected(text):
    with pytest.raises(BundleError, match="toleration"):
        BundleOptions.parse(accelerated_tolerations=[text])


def test_argocd_without_repo_url_is_rejected(make_bundle):
    with pytest.raises(BundleError, match="argocd deployer needs repo_url"):
        make_bundle(deployer="argocd", repo_url=None)


def test_flux_needs_repo_url_only_for_local_charts(make_bundle):
    make_bundle("eks-h100-training", "flux", repo_url=None)
    with pytest.raises(BundleError, match="flux deployer needs repo_url"):
        make_bundle("gke-a100-cos-training", "flux", repo_url=None)


def test_an_uploaded_recipe_yaml_bundles_like_the_resolution(make_bundle, catalog, recipes):
    bundle = make_bundle("gke-a100-cos-training")
    uploaded = parse_recipe(bundle.files["recipe.yaml"].decode(), catalog)
    again = build(uploaded, catalog, BundleOptions.parse(repo_url="https://git.example.com/x"))
    assert again.files == bundle.files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("criteria: [unclosed", "does not parse as YAML"),
        ("- a list", "expected a mapping"),
        ("criteria: {}\ncomponents: []\n", "deployment_order: Field required"),
    ],
)
def test_a_recipe_that_does_not_parse_is_rejected(catalog, text, message):
    with pytest.raises(InvalidInput, match=message):
        parse_recipe(text, catalog)


def test_an_edited_recipe_with_its_old_hash_is_rejected(catalog, recipes):
    doc = dict(recipes["eks-h100-training"].document)
    doc["warnings"] = ["edited"]
    with pytest.raises(BundleError, match="content_hash does not match"):
        parse_recipe(doc, catalog)
    del doc["content_hash"]
    assert parse_recipe(doc, catalog).warnings == ("edited",)


def test_a_recipe_out_of_dependency_order_is_rejected(catalog, recipes):
    doc = dict(recipes["eks-h100-training"].document)
    doc.pop("content_hash")
    doc["deployment_order"] = doc["deployment_order"][::-1]
    with pytest.raises(BundleError, match="before its dependencies"):
        parse_recipe(doc, catalog)


def test_an_uploaded_recipe_that_is_an_alias_bomb_is_refused_before_it_expands(catalog):
    # 9 levels of 9 aliases: 387 million strings once expanded, in under 500 bytes.
    bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in pairwise("abcdefghi")
    )
    with pytest.raises(TooLarge, match="aliases"):
        parse_recipe(bomb, catalog)
    with pytest.raises(TooLarge):
        parse_recipe(yaml.safe_load(bomb), catalog)  # the same, already parsed (JSON body)
