"""Every criteria value the recipes accept changes the recipe, or is refused with the reason;
the platform and OS layers deploy what AICR's recipes deploy (shared/reference/aicr.md §3.4-3.5).

Expected versions and chart repositories below are written from the reference, not read back
from recipes/.
"""

from __future__ import annotations

import dataclasses

import pytest

from plumb.aggregator.recipes import Criteria, CriteriaError, resolve
from plumb.aggregator.recipes.catalog import CRITERIA_KEYS


def _effect(catalog, criteria: Criteria) -> tuple:
    """What a resolution deploys and checks, less the criteria it echoes."""
    body = resolve(catalog, criteria).body()
    return (
        body["overlays"]["applied"],
        body["mixins"],
        body["components"],
        body["constraints"],
        body["deployment_order"],
    )


def _accepted(catalog):
    return [
        (key, value)
        for key, values in catalog.allowed_values().items()
        for value in values
        if value != "any"
    ]


def test_every_accepted_value_alone_changes_the_recipe(catalog) -> None:
    """A future value added to criteria.yaml (or a GPU to the catalog) without an overlay
    that changes something fails here, as it fails the catalog's own load check."""
    plain = _effect(catalog, Criteria())
    unchanged = [
        f"{key}={value}"
        for key, value in _accepted(catalog)
        if key != "intent" and _effect(catalog, Criteria(**{key: value})) == plain
    ]
    assert unchanged == []


def test_every_intent_changes_the_recipe_where_an_overlay_pins_it(catalog) -> None:
    """AICR's overlays pin an intent only with a service (eks-training, aks-inference …), so
    an intent counts as backed when it changes the recipe in such an overlay's criteria."""
    for value in catalog.allowed_values()["intent"][1:]:
        contexts = [
            Criteria(**{k: getattr(o.criteria, k) for k in CRITERIA_KEYS})
            for o in catalog.overlays.values()
            if o.criteria.intent == value
        ]
        assert any(
            _effect(catalog, c) != _effect(catalog, dataclasses.replace(c, intent="any"))
            for c in contexts
        ), value


@pytest.mark.parametrize(
    ("criteria", "said"),
    [
        (Criteria(service="lke"), "supported: any, aks, eks, gke, kind, ocp, oke, on-prem"),
        (Criteria(service="bcm"), "service 'bcm' is not supported"),
        (Criteria(service="metal3"), "service 'metal3' is not supported"),
        (Criteria(service="k0s"), "service 'k0s' is not supported"),
        (Criteria(platform="runai"), "supported: any, dynamo, kubeflow, kueue, nim, slurm"),
        (Criteria(service="ecs"), "unknown service 'ecs'"),
    ],
)
def test_values_aicr_takes_and_plumb_cannot_back_are_refused_with_the_supported_list(
    catalog, criteria, said
) -> None:
    with pytest.raises(CriteriaError) as caught:
        resolve(catalog, criteria)
    assert said in str(caught.value)


def test_a_node_count_no_overlay_depends_on_is_refused(catalog) -> None:
    with pytest.raises(CriteriaError, match=r"nodes 4 changes no recipe.*pin nodes: none"):
        resolve(catalog, Criteria(service="eks", nodes=4))
    assert resolve(catalog, Criteria(service="eks", nodes=0)).criteria.nodes == 0


def test_slurm_deploys_slinkys_three_charts_after_their_crds(catalog) -> None:
    r = resolve(catalog, Criteria(service="eks", intent="training", platform="slurm"))
    charts = {
        c["name"]: (c["source"], c["chart"], c["version"], c["namespace"])
        for c in r.components
        if c["name"].startswith("slinky-")
    }
    repo = "oci://ghcr.io/slinkyproject/charts"
    assert charts == {
        "slinky-slurm-operator-crds": (repo, "slurm-operator-crds", "1.2.0", "slinky"),
        "slinky-slurm-operator": (repo, "slurm-operator", "1.2.0", "slinky"),
        "slinky-slurm": (repo, "slurm", "1.2.0", "slurm"),
    }
    order = r.deployment_order
    assert (
        order.index("cert-manager")
        < order.index("slinky-slurm-operator")
        < order.index("slinky-slurm")
    )
    assert order.index("slinky-slurm-operator-crds") < order.index("slinky-slurm-operator")
    assert "mixin:platform-slurm" not in r.applied and r.mixins[-1] == "platform-slurm"


def test_nim_deploys_the_nim_operator_behind_agentgateway_on_kubernetes_1_34(catalog) -> None:
    r = resolve(catalog, Criteria(platform="nim"))
    got = {c["name"]: (c["version"], c.get("source")) for c in r.components}
    assert got["k8s-nim-operator"] == ("3.1.0", "https://helm.ngc.nvidia.com/nvidia")
    assert got["agentgateway"] == ("v1.5.0", "oci://cr.agentgateway.dev/charts")
    assert got["agentgateway-crds"] == ("v1.5.0", "oci://cr.agentgateway.dev/charts")
    assert r.deployment_order.index("agentgateway-crds") < r.deployment_order.index("agentgateway")
    nim = next(c for c in r.constraints if c["name"] == "k8s-version-nim")
    assert nim["check"] == "k8s.version >= 1.34"


def test_dynamo_alone_applies_the_dynamo_layer(catalog) -> None:
    r = resolve(catalog, Criteria(platform="dynamo"))
    assert "dynamo" in r.applied
    assert {"dynamo-platform", "agentgateway", "agentgateway-crds"} <= {
        c["name"] for c in r.components
    }


@pytest.mark.parametrize("os_name", ["talos", "amazonlinux"])
def test_an_os_whose_image_owns_the_driver_deploys_no_driver_or_toolkit(catalog, os_name) -> None:
    r = resolve(catalog, Criteria(os=os_name))
    values = r.component("gpu-operator")["values"]
    assert values["driver"]["enabled"] is False
    assert values["toolkit"] == {"enabled": False}
    assert r.component("driver") is None and r.component("container-toolkit") is None
    assert r.driver_owner.owner == "host"


@pytest.mark.parametrize(
    ("os_name", "os_id"),
    [("rhel", "rhel"), ("ol", "ol"), ("amazonlinux", "amzn"), ("talos", "talos")],
)
def test_an_os_layer_checks_the_nodes_os_release_id(
    catalog, make_facts, as_of, os_name, os_id
) -> None:
    mine = resolve(catalog, Criteria(os=os_name), make_facts(os_id=os_id), as_of=as_of)
    assert os_name in mine.applied
    assert [c["status"] for c in mine.constraints if c["name"] == "os-id"] == ["pass"]
    other = resolve(catalog, Criteria(os=os_name), make_facts(os_id="ubuntu"), as_of=as_of)
    assert dict(other.excluded)[os_name] == (
        f"mixin os-{os_name} constraint os-id failed: os.id = ubuntu, needs {os_id}"
    )


def test_openshift_installs_nfd_the_gpu_operator_and_cert_manager_from_olm(catalog) -> None:
    """AICR's ocp overlay: the operators from OperatorHub Subscriptions, every base chart off
    (aicr.md §3.5 "all base comps disabled"); packages, channels and catalogs after AICR's
    components/*-ocp-olm/values.yaml. Each operator's CR comes after its Subscription, in
    AICR's order (ADR-010 design notes): nfd-ocp-olm -> nfd-ocp -> gpu-operator-ocp-olm ->
    gpu-operator-ocp."""
    r = resolve(catalog, Criteria(service="ocp"))
    assert r.applied == ("base", "ocp")
    assert sorted(c["name"] for c in r.components) == [
        "cert-manager-ocp-olm",
        "gpu-operator-ocp",
        "gpu-operator-ocp-olm",
        "nfd-ocp",
        "nfd-ocp-olm",
    ]
    gpu_stack = ["nfd-ocp-olm", "nfd-ocp", "gpu-operator-ocp-olm", "gpu-operator-ocp"]
    assert [n for n in r.deployment_order if n in gpu_stack] == gpu_stack
    assert r.warnings == ()
    namespaces = {c["name"]: c["namespace"] for c in r.components}
    assert namespaces == {
        "nfd-ocp-olm": "openshift-nfd",
        "nfd-ocp": "openshift-nfd",
        "gpu-operator-ocp-olm": "gpu-operator",
        "gpu-operator-ocp": "gpu-operator",
        "cert-manager-ocp-olm": "cert-manager-operator",
    }
    assert r.driver_owner.owner == "operator"  # the ClusterPolicy builds it


def test_dynamo_deploys_grove_beside_the_platform(catalog) -> None:
    r = resolve(catalog, Criteria(platform="dynamo"))
    grove = r.component("grove")
    assert (grove["source"], grove["chart"], grove["version"], grove["namespace"]) == (
        "oci://ghcr.io/ai-dynamo/grove",
        "grove-charts",
        "v0.1.0-alpha.12",
        "dynamo-system",
    )


def test_the_kueue_platform_adds_kueue_on_kubernetes_1_32_4(catalog) -> None:
    plain = {c["name"] for c in resolve(catalog, Criteria()).components}
    r = resolve(catalog, Criteria(platform="kueue"))
    assert {c["name"] for c in r.components} - plain == {"kueue"}
    kueue = r.component("kueue")
    assert (kueue["source"], kueue["chart"], kueue["version"], kueue["namespace"]) == (
        "oci://registry.k8s.io/kueue/charts",
        "kueue",
        "0.19.3",
        "kueue-system",
    )
    assert next(c for c in r.constraints if c["name"] == "k8s-version-kueue")["check"] == (
        "k8s.version >= 1.32.4"
    )


def test_k8s_aibom_only_in_h100_gke_cos_inference_and_not_its_dynamo_leaf(catalog) -> None:
    """AICR installs k8s-aibom in one stock recipe, h100-gke-cos-inference; its dynamo leaf
    declines it (AICR docs/user/component-catalog.md)."""
    gke = dict(service="gke", accelerator="h100", os="cos", intent="inference")
    names = {c["name"] for c in resolve(catalog, Criteria(**gke)).components}
    assert "k8s-aibom" in names
    aibom = resolve(catalog, Criteria(**gke)).component("k8s-aibom")
    assert (aibom["source"], aibom["version"]) == (
        "oci://ghcr.io/googlecloudplatform/charts",
        "1.3.0",
    )
    dynamo = {c["name"] for c in resolve(catalog, Criteria(**gke, platform="dynamo")).components}
    assert "k8s-aibom" not in dynamo and "grove" in dynamo
    training = dict(gke, intent="training")
    assert "k8s-aibom" not in {c["name"] for c in resolve(catalog, Criteria(**training)).components}
