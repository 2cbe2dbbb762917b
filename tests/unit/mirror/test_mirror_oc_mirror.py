"""`plumb mirror list --format oc-mirror`: an oc-mirror v2 ImageSetConfiguration of a recipe.

The schema below is written by hand from openshift/oc-mirror
v2/internal/pkg/api/v2alpha1/type_config.go and type_config_include.go (the JSON names of
ImageSetConfigurationSpec, Mirror, Operator, IncludePackage, IncludeChannel, Helm,
Repository, Chart, Image; every object closed, as oc-mirror's strict YAML decoding refuses
unknown keys), and matches Red Hat's "ImageSet configuration parameters for oc-mirror plugin
v2" (OpenShift 4.19). The OpenShift expectations are written from the Subscriptions' sources
(NVIDIA/aicr components/*-ocp-olm/values.yaml: packages, channels, CatalogSources), the
index images of OpenShift's default CatalogSources at 4.19 (registry.redhat.io/redhat/
redhat-operator-index and certified-operator-index, Red Hat's oc-mirror examples), and the
NFD operand image of Red Hat's NodeFeatureDiscovery example.
"""

from __future__ import annotations

import httpx
import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from plumb.aggregator.api import create_app
from plumb.aggregator.bundle import BundleError, BundleOptions, Recipe, build
from plumb.aggregator.cli import app
from plumb.aggregator.mirror import MirrorList, MirrorOperator, documents, text
from plumb.aggregator.process import open_process
from plumb.aggregator.recipes import Criteria, load_catalog, resolve
from plumb.aggregator.settings import AggregatorSettings


def _closed(properties: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}  # fmt: skip


_S = {"type": "string"}
_IMAGE = _closed({"name": _S}, ("name",))
_CHART = _closed({"name": _S, "version": _S, "path": _S, "imagePaths": {"type": "array"},
                  "values": {"type": "object"}}, ("name",))  # fmt: skip
_BUNDLE_RANGE = {"minVersion": _S, "maxVersion": _S}
IMAGE_SET_CONFIGURATION = _closed(
    {
        "kind": {"const": "ImageSetConfiguration"},
        "apiVersion": {"const": "mirror.openshift.io/v2alpha1"},
        "archiveSize": {"type": "integer"},
        "mirror": _closed({
            "platform": {"type": "object"},
            "operators": {"type": "array", "items": _closed({
                "catalog": _S, "targetCatalog": _S, "targetTag": _S, "full": {"type": "boolean"},
                "skipDependencies": {"type": "boolean"}, "targetCatalogSourceTemplate": _S,
                "packages": {"type": "array", "items": _closed({
                    "name": _S, "defaultChannel": _S, "bundles": {"type": "array"},
                    **_BUNDLE_RANGE,
                    "channels": {"type": "array",
                                 "items": _closed({"name": _S, **_BUNDLE_RANGE}, ("name",))},
                }, ("name",))},
            }, ("catalog", "packages"))},
            "additionalImages": {"type": "array", "items": _IMAGE},
            "blockedImages": {"type": "array", "items": _IMAGE},
            "helm": _closed({
                "repositories": {"type": "array", "items": _closed(
                    {"url": _S, "name": _S, "charts": {"type": "array", "items": _CHART}},
                    ("url", "name", "charts"))},
                "local": {"type": "array", "items": _CHART},
            }),
            "samples": {"type": "array"},
        }),
    },
    ("kind", "apiVersion", "mirror"),
)  # fmt: skip

REDHAT = "registry.redhat.io/redhat/redhat-operator-index:v4.19"
CERTIFIED = "registry.redhat.io/redhat/certified-operator-index:v4.19"
NFD_OPERAND = "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.19"


def _oc_mirror(criteria: dict) -> dict:
    catalog = load_catalog()
    listed = MirrorList.of(resolve(catalog, Criteria(**criteria)), catalog)
    [doc] = yaml.safe_load_all(text(documents(listed, "oc-mirror"), "oc-mirror"))
    jsonschema.validate(doc, IMAGE_SET_CONFIGURATION)
    return doc


def test_openshift_recipe_lists_each_subscriptions_catalog_package_and_channel() -> None:
    doc = _oc_mirror(dict(service="ocp"))
    # Deployment order: cert-manager-ocp-olm, nfd-ocp-olm, nfd-ocp, gpu-operator-ocp-olm, ...;
    # each catalog once, at its first package; no Helm chart (every base chart is off).
    assert doc["mirror"] == {
        "operators": [
            {"catalog": REDHAT, "packages": [
                {"name": "openshift-cert-manager-operator", "channels": [{"name": "stable-v1"}]},
                {"name": "nfd", "channels": [{"name": "stable"}]},
            ]},
            {"catalog": CERTIFIED, "packages": [
                {"name": "gpu-operator-certified", "channels": [{"name": "v26.7"}]},
            ]},
        ],
        "additionalImages": [{"name": NFD_OPERAND}],
    }  # fmt: skip


def test_plumb_list_names_the_openshift_operators_too() -> None:
    catalog = load_catalog()
    listed = MirrorList.of(resolve(catalog, Criteria(service="ocp")), catalog)
    [doc] = documents(listed, "yaml")
    assert doc["charts"] == []
    assert doc["images"] == [{"component": "nfd-ocp", "key": "operandImage", "image": NFD_OPERAND}]
    assert {o["component"]: (o["package"], o["channel"], o["source"], o["catalog"])
            for o in doc["operators"]} == {
        "nfd-ocp-olm": ("nfd", "stable", "redhat-operators", REDHAT),
        "gpu-operator-ocp-olm": ("gpu-operator-certified", "v26.7", "certified-operators",
                                 CERTIFIED),
        "cert-manager-ocp-olm": ("openshift-cert-manager-operator", "stable-v1",
                                 "redhat-operators", REDHAT),
    }  # fmt: skip


def test_charts_go_to_helm_repositories_and_oci_charts_to_their_vendored_path() -> None:
    criteria = dict(service="gke", accelerator="a100", os="cos", intent="training")
    doc = _oc_mirror(criteria)
    helm = doc["mirror"]["helm"]
    repos = {r["url"]: r for r in helm["repositories"]}
    # recipes/registry.yaml: three charts from the prometheus-community repository
    assert repos["https://prometheus-community.github.io/helm-charts"] == {
        "name": "prometheus-community-github-io-helm-charts",
        "url": "https://prometheus-community.github.io/helm-charts",
        "charts": [
            {"name": "prometheus-operator-crds", "version": "28.0.1"},
            {"name": "kube-prometheus-stack", "version": "84.4.0"},
            {"name": "prometheus-adapter", "version": "5.3.0"},
        ],
    }
    assert {"name": "cert-manager", "version": "v1.20.2"} in repos[
        "https://charts.jetstack.io"]["charts"]  # fmt: skip
    assert not any(url.startswith("oci://") for url in repos)
    # The OCI charts (kai-scheduler, kubeflow-trainer, dra-driver, nodewright, nvsentinel)
    # are read from disk: the chart.tgz `plumb bundle --vendor-charts` puts in their folder.
    local = {c["name"]: c["path"] for c in helm["local"]}
    assert set(local) == {"kai-scheduler", "kubeflow-trainer", "dra-driver-nvidia-gpu",
                          "nodewright", "nvsentinel"}  # fmt: skip
    catalog = load_catalog()
    folders = {p.split("/")[0] for p in build(
        Recipe.of(resolve(catalog, Criteria(**criteria))), catalog, BundleOptions.parse("helm")
    ).files if "/" in p}  # fmt: skip
    assert all(path.endswith("/chart.tgz") and path.split("/")[0] in folders
               for path in local.values())  # fmt: skip
    assert doc["mirror"]["additionalImages"] == [
        {"name": "cos-nvidia-installer:fixed"}, {"name": "registry.k8s.io/pause:3.10"}
    ]  # fmt: skip
    assert "operators" not in doc["mirror"]


def test_a_subscription_without_a_catalog_index_is_refused_for_oc_mirror() -> None:
    operator = MirrorOperator("x-olm", "pkg", "stable", "my-catalog", None)
    listed = MirrorList({}, "0" * 64, (), (), ("x-olm",), (operator,))
    with pytest.raises(BundleError, match="names no catalogIndex") as err:
        documents(listed, "oc-mirror")
    assert err.value.hint and "catalogIndex" in err.value.hint
    assert documents(listed, "yaml")[0]["operators"][0]["catalog"] is None


def test_cli_with_data_writes_the_image_set_configuration(tmp_path) -> None:
    args = ["mirror", "list", "--data", str(tmp_path), "--service", "ocp", "-f", "oc-mirror"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# oc-mirror v2 ImageSetConfiguration")
    doc = yaml.safe_load(result.output)
    assert doc["kind"] == "ImageSetConfiguration"
    assert [o["catalog"] for o in doc["mirror"]["operators"]] == [REDHAT, CERTIFIED]


async def test_api_answers_oc_mirror_for_get_and_post(tmp_path) -> None:
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}", api={"anonymous_read": True}
    )
    process = await open_process(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(process.core))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            got = await client.get("/v1/mirror", params={"service": "ocp", "format": "oc-mirror"})
            posted = await client.post(
                "/v1/mirror", params={"format": "oc-mirror"},
                json={"criteria": {"service": "ocp"}},
            )  # fmt: skip
    finally:
        process.store.close()
    assert got.status_code == 200, got.text
    assert posted.status_code == 200, posted.text
    [doc] = got.json()["documents"]
    assert got.json()["format"] == "oc-mirror" and doc["kind"] == "ImageSetConfiguration"
    assert posted.json()["documents"] == [doc]
