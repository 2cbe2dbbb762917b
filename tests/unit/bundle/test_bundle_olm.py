"""OpenShift's OLM components bundle as local charts that render an OperatorGroup and a
Subscription, checked with a real ``helm template``.

Packages, channels and catalogs are written from AICR's components/*-ocp-olm/values.yaml
(NVIDIA/aicr), not read back from recipes/.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from plumb.aggregator.bundle import BundleOptions, Recipe, build
from plumb.aggregator.recipes import Criteria, resolve

OLM = {
    "nfd-ocp-olm": ("openshift-nfd", "nfd", "stable", "redhat-operators", ["openshift-nfd"]),
    "gpu-operator-ocp-olm": (
        "gpu-operator",
        "gpu-operator-certified",
        "v26.7",
        "certified-operators",
        ["gpu-operator"],
    ),
    "cert-manager-ocp-olm": (
        "cert-manager-operator",
        "openshift-cert-manager-operator",
        "stable-v1",
        "redhat-operators",
        None,
    ),
}


@pytest.mark.parametrize("deployer", ["helm", "argocd"])
def test_olm_components_render_an_operator_group_and_a_subscription(
    catalog, helm, helm_env, tmp_path, deployer
) -> None:
    recipe = Recipe.of(resolve(catalog, Criteria(service="ocp")))
    bundle = build(
        recipe, catalog, BundleOptions.parse(deployer, repo_url="https://git.example.com/s.git")
    )
    bundle.write(tmp_path)
    folders = {p.split("/")[0] for p in bundle.files if p.endswith("/Chart.yaml")}
    for name, (namespace, package, channel, source, targets) in OLM.items():
        folder = next(f for f in folders if f.endswith(f"-{name}"))
        rendered = subprocess.run(
            [helm, "template", name, str(tmp_path / folder), "-n", namespace],
            env=helm_env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        docs = {d["kind"]: d for d in yaml.safe_load_all(rendered) if d}
        assert sorted(docs) == ["OperatorGroup", "Subscription"]
        assert docs["Subscription"]["apiVersion"] == "operators.coreos.com/v1alpha1"
        assert docs["Subscription"]["metadata"]["namespace"] == namespace
        assert docs["Subscription"]["spec"] == {
            "name": package,
            "channel": channel,
            "source": source,
            "sourceNamespace": "openshift-marketplace",
            "installPlanApproval": "Automatic",
        }
        group = docs["OperatorGroup"]
        assert group["apiVersion"] == "operators.coreos.com/v1"
        assert group["metadata"]["namespace"] == namespace
        # No targetNamespaces: OLM's AllNamespaces mode (cert-manager issues cluster-wide).
        assert group["spec"] == ({"targetNamespaces": targets} if targets else {})
