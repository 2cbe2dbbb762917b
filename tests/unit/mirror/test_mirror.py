"""`plumb mirror list` and `GET /v1/mirror`: a recipe's charts and images as Plumb's list, as
Hauler manifests and as a Zarf package.

Expected values are written from the recipe data for GKE + A100 + COS + training: overlays
a100-gke-cos-training -> gke-cos-training -> gke-cos -> gke -> base add kubeflow-trainer and
gcp-driver-installer to base's charts and drop the operator's driver; each chart's source,
name, version and namespace is its entry in recipes/registry.yaml; the OCI references are the
upstream install commands (kai-scheduler/KAI-Scheduler README, NVIDIA/nodewright README,
kubernetes-sigs/kueue and ai-dynamo/grove install docs); the installer's images are
recipes/manifests/gcp-driver-installer/values.yaml `installerImage` and `pauseImage`. Shapes:
hauler-dev/hauler pkg/apis/hauler.cattle.io/v1 (Charts, Images) and zarf-dev/zarf
examples/helm-charts/zarf.yaml (an OCI chart's url carries the chart name).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from plumb.aggregator.api import create_app
from plumb.aggregator.cli import app
from plumb.aggregator.mirror import MirrorList, documents, text
from plumb.aggregator.process import open_process
from plumb.aggregator.recipes import Criteria, load_catalog, resolve
from plumb.aggregator.settings import AggregatorSettings

CRITERIA = dict(service="gke", accelerator="a100", os="cos", intent="training")

# component: (source, chart, version, namespace), from recipes/registry.yaml
CHARTS = {
    "cert-manager": ("https://charts.jetstack.io", "cert-manager", "v1.20.2", "cert-manager"),
    "kai-scheduler": (
        "oci://ghcr.io/kai-scheduler/kai-scheduler", "kai-scheduler", "v0.16.9", "kai-scheduler",
    ),
    "kubeflow-trainer": (
        "oci://ghcr.io/kubeflow/charts", "kubeflow-trainer", "2.2.0", "kubeflow",
    ),
    "nfd": (
        "https://kubernetes-sigs.github.io/node-feature-discovery/charts",
        "node-feature-discovery", "0.19.0", "node-feature-discovery",
    ),
    "gpu-operator": (
        "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0", "gpu-operator",
    ),
    "dra-driver": (
        "oci://registry.k8s.io/dra-driver-nvidia/charts", "dra-driver-nvidia-gpu", "0.5.0",
        "nvidia-dra-driver",
    ),
    "nodewright-operator": (
        "oci://ghcr.io/nvidia/nodewright/charts", "nodewright", "v0.17.1", "skyhook",
    ),
    "nvsentinel": ("oci://ghcr.io/nvidia", "nvsentinel", "v1.20.0", "nvsentinel"),
    "prometheus-operator-crds": (
        "https://prometheus-community.github.io/helm-charts", "prometheus-operator-crds",
        "28.0.1", "monitoring",
    ),
    "k8s-ephemeral-storage-metrics": (
        "https://jmcgrath207.github.io/k8s-ephemeral-storage-metrics/chart",
        "k8s-ephemeral-storage-metrics", "1.19.2", "monitoring",
    ),
    "kube-prometheus-stack": (
        "https://prometheus-community.github.io/helm-charts", "kube-prometheus-stack",
        "84.4.0", "monitoring",
    ),
    "prometheus-adapter": (
        "https://prometheus-community.github.io/helm-charts", "prometheus-adapter", "5.3.0",
        "monitoring",
    ),
}  # fmt: skip
INSTALLER_IMAGES = [
    {"component": "gcp-driver-installer", "key": "installerImage",
     "image": "cos-nvidia-installer:fixed"},
    {"component": "gcp-driver-installer", "key": "pauseImage",
     "image": "registry.k8s.io/pause:3.10"},
]  # fmt: skip
# registry.yaml dependencies among these charts: each must come after what it needs
AFTER = [
    ("nfd", "gpu-operator"),
    ("gpu-operator", "dra-driver"),
    ("cert-manager", "kubeflow-trainer"),
    ("prometheus-operator-crds", "kube-prometheus-stack"),
    ("kube-prometheus-stack", "prometheus-adapter"),
]


@pytest.fixture(scope="module")
def listed() -> MirrorList:
    catalog = load_catalog()
    return MirrorList.of(resolve(catalog, Criteria(**CRITERIA)), catalog)


def _parsed(listed: MirrorList, fmt: str) -> list[dict]:
    return list(yaml.safe_load_all(text(documents(listed, fmt), fmt)))


def test_plumb_list_names_every_chart_with_its_source_and_the_installers_images(listed):
    [doc] = _parsed(listed, "yaml")
    assert set(doc) == {"criteria", "content_hash", "charts", "images", "operators"}
    assert doc["operators"] == []  # no OLM Subscription outside OpenShift
    assert {k: doc["criteria"][k] for k in CRITERIA} == CRITERIA
    got = {c["component"]: (c["source"], c["chart"], c["version"], c["namespace"])
           for c in doc["charts"]}  # fmt: skip
    assert got == CHARTS and len(doc["charts"]) == len(CHARTS)
    order = [c["component"] for c in doc["charts"]]
    assert all(order.index(a) < order.index(b) for a, b in AFTER)
    assert doc["images"] == INSTALLER_IMAGES


def test_hauler_output_is_a_charts_and_an_images_manifest_with_add_images(listed):
    charts, images = _parsed(listed, "hauler")
    assert charts["apiVersion"] == images["apiVersion"] == "content.hauler.cattle.io/v1"
    assert (charts["kind"], images["kind"]) == ("Charts", "Images")
    assert charts["metadata"] == {"name": "plumb-gke-a100-cos-training-charts"}
    expected = {(chart, source, version) for source, chart, version, _ in CHARTS.values()}
    got = charts["spec"]["charts"]
    assert {(c["name"], c["repoURL"], c["version"]) for c in got} == expected
    assert len(got) == len(CHARTS) and all(c["add-images"] is True for c in got)
    assert all(set(c) == {"name", "repoURL", "version", "add-images"} for c in got)
    assert images["spec"] == {
        "images": [{"name": "cos-nvidia-installer:fixed"}, {"name": "registry.k8s.io/pause:3.10"}]
    }


def test_zarf_output_is_a_package_with_one_component_per_recipe_component(listed):
    [pkg] = _parsed(listed, "zarf")
    assert pkg["kind"] == "ZarfPackageConfig"
    assert pkg["metadata"]["name"] == "plumb-gke-a100-cos-training"
    comps = {c["name"]: c for c in pkg["components"]}
    assert set(comps) == set(CHARTS) | {"gcp-driver-installer"}
    assert all(c["required"] is True for c in comps.values())
    assert comps["gcp-driver-installer"] == {
        "name": "gcp-driver-installer",
        "required": True,
        "images": ["cos-nvidia-installer:fixed", "registry.k8s.io/pause:3.10"],
    }
    assert comps["kubeflow-trainer"]["charts"] == [
        {"name": "kubeflow-trainer", "namespace": "kubeflow",
         "url": "oci://ghcr.io/kubeflow/charts/kubeflow-trainer", "version": "2.2.0"}
    ]  # fmt: skip
    assert comps["nfd"]["charts"] == [
        {"name": "nfd", "namespace": "node-feature-discovery",
         "url": "https://kubernetes-sigs.github.io/node-feature-discovery/charts",
         "repoName": "node-feature-discovery", "version": "0.19.0"}
    ]  # fmt: skip
    order = [c["name"] for c in pkg["components"]]
    assert all(order.index(a) < order.index(b) for a, b in AFTER)
    # `helm upgrade -i kai-scheduler oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler`;
    # `helm install nodewright oci://ghcr.io/nvidia/nodewright/charts/nodewright`
    assert comps["kai-scheduler"]["charts"][0]["url"] == (
        "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
    )
    assert comps["nodewright-operator"]["charts"][0]["url"] == (
        "oci://ghcr.io/nvidia/nodewright/charts/nodewright"
    )


@pytest.mark.parametrize(
    ("criteria", "component", "url", "version", "namespace"),
    [
        # `helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.19.3`
        (dict(service="eks", intent="training", platform="kueue"), "kueue",
         "oci://registry.k8s.io/kueue/charts/kueue", "0.19.3", "kueue-system"),
        # `helm upgrade -i grove oci://ghcr.io/ai-dynamo/grove/grove-charts --version ...`
        (dict(service="eks", intent="inference", platform="dynamo"), "grove",
         "oci://ghcr.io/ai-dynamo/grove/grove-charts", "v0.1.0-alpha.12", "dynamo-system"),
    ],
)  # fmt: skip
def test_a_new_components_chart_is_its_upstream_oci_reference(
    criteria, component, url, version, namespace
):
    catalog = load_catalog()
    mirror = MirrorList.of(resolve(catalog, Criteria(**criteria)), catalog)
    [pkg] = list(yaml.safe_load_all(text(documents(mirror, "zarf"), "zarf")))
    [chart] = {c["name"]: c for c in pkg["components"]}[component]["charts"]
    assert chart == {"name": component, "namespace": namespace, "url": url, "version": version}
    assert not [i for i in mirror.images if i.component == component]  # Hauler/Zarf find them


def test_every_format_starts_with_a_comment_saying_where_chart_images_come_from(listed):
    for fmt, words in (("yaml", "not listed"), ("hauler", "add-images"), ("zarf", "find-images")):
        head = text(documents(listed, fmt), fmt).splitlines()[:2]
        assert all(line.startswith("# ") for line in head) and words in " ".join(head)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}", api={"anonymous_read": True}
    )
    process = await open_process(settings)
    transport = httpx.ASGITransport(app=create_app(process.core))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c
    process.store.close()


async def test_api_answers_the_documents_of_each_format(client):
    resp = await client.get("/v1/mirror", params={**CRITERIA, "format": "hauler"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["format"] == "hauler"
    assert [d["kind"] for d in body["documents"]] == ["Charts", "Images"]
    plain = (await client.get("/v1/mirror", params=CRITERIA)).json()
    assert plain["format"] == "yaml" and len(plain["documents"][0]["charts"]) == len(CHARTS)


async def test_api_refuses_an_unknown_format_or_criteria_value_in_the_error_shape(client):
    resp = await client.get("/v1/mirror", params={**CRITERIA, "format": "helmfile"})
    assert resp.status_code == 400 and resp.json()["code"] == "invalid_input"
    assert "format" in resp.json()["message"]
    resp = await client.get("/v1/mirror", params={"accelerator": "z9000"})
    assert resp.status_code == 400 and resp.json()["code"] == "invalid_input"
    assert "z9000" in resp.json()["message"] and resp.json()["hint"]


def test_cli_with_data_writes_hauler_yaml_to_stdout(tmp_path: Path) -> None:
    args = ["mirror", "list", "--data", str(tmp_path), "--format", "hauler"]
    args += [f"--{k}={v}" for k, v in CRITERIA.items()]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    charts, images = yaml.safe_load_all(result.output)
    assert len(charts["spec"]["charts"]) == len(CHARTS)
    assert images["spec"]["images"][1] == {"name": "registry.k8s.io/pause:3.10"}


def test_cli_asks_the_aggregator_and_prints_its_documents_as_yaml(monkeypatch) -> None:
    asked = []
    zarf = {"kind": "ZarfPackageConfig", "metadata": {"name": "x"}, "components": []}

    def fake_api(server, path, *, params=None, **_):
        asked.append((path, params))
        return {"format": "zarf", "documents": [zarf]}

    monkeypatch.setattr("plumb.aggregator.cli.mirror.api_json", fake_api)
    result = CliRunner().invoke(app, ["mirror", "list", "--service", "gke", "-f", "zarf"])
    assert result.exit_code == 0, result.output
    assert asked == [
        ("/v1/mirror", {"service": "gke", "accelerator": "any", "os": "any", "intent": "any",
                        "platform": "any", "format": "zarf"})
    ]  # fmt: skip
    assert yaml.safe_load(result.output) == zarf
    assert result.output.startswith("# A Zarf package")


# --- a recipe from a saved snapshot, a criteria file or a node -----------------------------

AICR = Path(__file__).resolve().parents[2] / "data" / "real" / "aicr"
# The real EKS H100 snapshot implies eks / h100 / ubuntu (K8s.node.provider, GPU.smi
# gpu.model, OS.release.ID); the eks overlay adds the EBS CSI driver (recipes/registry.yaml).
EBS = {
    "component": "aws-ebs-csi",
    "chart": "aws-ebs-csi-driver",
    "source": "https://kubernetes-sigs.github.io/aws-ebs-csi-driver",
    "version": "2.59.0",
    "namespace": "kube-system",
}


async def test_api_lists_the_recipe_of_a_posted_aicr_snapshot(client):
    snapshot = yaml.safe_load((AICR / "cns_snapshot_h100.yaml").read_text())
    resp = await client.post("/v1/mirror", params={"format": "yaml"}, json={"snapshot": snapshot})
    assert resp.status_code == 200, resp.text
    (doc,) = resp.json()["documents"]
    assert (doc["criteria"]["service"], doc["criteria"]["accelerator"]) == ("eks", "h100")
    assert doc["criteria"]["os"] == "ubuntu" and EBS in doc["charts"]


async def test_api_refuses_a_body_that_is_not_a_snapshot_in_the_error_shape(client):
    resp = await client.post("/v1/mirror", json={"snapshot": {"kind": "Pod"}})
    assert resp.status_code == 400 and "expected kind Snapshot" in resp.json()["message"]


@pytest.mark.parametrize(
    "source", [["--snapshot", "cns_snapshot_h100.yaml"], ["--criteria", "criteria.yaml"]]
)
def test_cli_lists_the_recipe_of_a_snapshot_or_criteria_file_here(tmp_path: Path, source):
    args = ["mirror", "list", "--data", str(tmp_path), source[0], str(AICR / source[1])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.output)
    assert doc["criteria"]["service"] == "eks" and EBS in doc["charts"]


def test_cli_asks_the_aggregator_for_a_nodes_recipe_by_post(monkeypatch) -> None:
    asked = []

    def fake_api(server, path, *, method="GET", params=None, body=None):
        asked.append((method, path, params, body))
        return {"format": "yaml", "documents": [{"charts": []}]}

    monkeypatch.setattr("plumb.aggregator.cli.mirror.api_json", fake_api)
    result = CliRunner().invoke(app, ["mirror", "list", "--node", "gpu-7"])
    assert result.exit_code == 0, result.output
    assert asked == [("POST", "/v1/mirror", {"format": "yaml"}, {"node": "gpu-7"})]


def test_cli_refuses_two_recipe_sources(tmp_path: Path) -> None:
    args = ["mirror", "list", "--node", "n", "--criteria", str(AICR / "criteria.yaml")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "at most one of" in result.output
