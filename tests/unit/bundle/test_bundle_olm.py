"""OpenShift's OLM components bundle as local charts that render an OperatorGroup and a
Subscription, and the operators' own CRs (NodeFeatureDiscovery, ClusterPolicy) as charts
installed once their CRDs exist; checked with a real ``helm template`` and the scripts.

Packages, channels and catalogs are written from AICR's components/*-ocp-olm/values.yaml
(NVIDIA/aicr), the CRs from Red Hat's and NVIDIA's published samples; none is read back
from recipes/.
"""

from __future__ import annotations

import shutil
import subprocess

import jsonschema
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


# The NodeFeatureDiscovery CR, written from Red Hat's "Creating a NodeFeatureDiscovery CR by
# using the CLI" (OpenShift 4.19/4.20): nfd-instance in openshift-nfd, the -rhel9 operand of
# the recipe's minimum OpenShift (4.19), the worker's PCI classes 0200/03/12 labelled by
# vendor. `topologyUpdater` as the CRD spells it (the docs' `topologyupdater` is dropped by the
# API server); servicePort 12000 from openshift/cluster-nfd-operator's CSV alm-examples.
NFD_CR = {
    "apiVersion": "nfd.openshift.io/v1",
    "kind": "NodeFeatureDiscovery",
    "metadata": {
        "name": "nfd-instance",
        "namespace": "openshift-nfd",
        "annotations": {"argocd.argoproj.io/sync-options": "SkipDryRunOnMissingResource=true"},
    },
    "spec": {
        "instance": "",
        "topologyUpdater": False,
        "operand": {
            "image": "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.19",
            "imagePullPolicy": "Always",
            "servicePort": 12000,
        },
        "workerConfig": {"configData": None},  # the worker config, checked parsed below
    },
}
NFD_WORKER = {
    "core": {"sleepInterval": "60s"},
    "sources": {"pci": {"deviceClassWhitelist": ["0200", "03", "12"],
                        "deviceLabelFields": ["vendor"]}},
}  # fmt: skip

# The ClusterPolicy NVIDIA's certified bundle offers in OperatorHub, written from NVIDIA/
# gpu-operator bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml alm-examples.
CLUSTER_POLICY_SPEC = {
    "operator": {"defaultRuntime": "crio", "use_ocp_driver_toolkit": True, "initContainer": {}},
    "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container"},
    "driver": {
        "enabled": True,
        "useNvidiaDriverCRD": False,
        "kernelModuleType": "auto",
        "upgradePolicy": {
            "autoUpgrade": True,
            "drain": {"deleteEmptyDir": False, "enable": False, "force": False,
                      "timeoutSeconds": 300},
            "maxParallelUpgrades": 1,
            "maxUnavailable": "25%",
            "podDeletion": {"deleteEmptyDir": False, "force": False, "timeoutSeconds": 300},
            "waitForCompletion": {"timeoutSeconds": 0},
        },
        "repoConfig": {"configMapName": ""},
        "certConfig": {"name": ""},
        "licensingConfig": {"nlsEnabled": True, "configMapName": ""},
        "virtualTopology": {"config": ""},
        "kernelModuleConfig": {"name": ""},
    },
    "dcgmExporter": {"enabled": True, "config": {"name": ""}, "serviceMonitor": {"enabled": True}},
    "dcgm": {"enabled": True},
    "daemonsets": {"updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
    "devicePlugin": {"enabled": True, "config": {"name": "", "default": ""},
                     "mps": {"root": "/run/nvidia/mps"}},
    "gfd": {"enabled": True},
    "migManager": {"enabled": True},
    "nodeStatusExporter": {"enabled": True},
    "mig": {"strategy": "single"},
    "toolkit": {"enabled": True},
    "validator": {"plugin": {"env": []}},
    "vgpuManager": {"enabled": False},
    "vgpuDeviceManager": {"enabled": True},
    "sandboxDevicePlugin": {"enabled": True},
    "vfioManager": {"enabled": True},
    "gds": {"enabled": False},
    "gdrcopy": {"enabled": False},
}  # fmt: skip
# The CRD's spec.required (NVIDIA/gpu-operator bundle/manifests/nvidia.com_clusterpolicies.yaml)
CLUSTER_POLICY_REQUIRED = {"dcgmExporter", "devicePlugin", "driver", "gfd", "operator", "toolkit"}
CRDS = {
    "nfd-ocp": "nodefeaturediscoveries.nfd.openshift.io",
    "gpu-operator-ocp": "clusterpolicies.nvidia.com",
}


def _template(helm, helm_env, folder, name, namespace) -> list[dict]:
    rendered = subprocess.run(
        [helm, "template", name, str(folder), "-n", namespace],
        env=helm_env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [d for d in yaml.safe_load_all(rendered) if d]


@pytest.fixture(scope="module")
def ocp(catalog) -> Recipe:
    return Recipe.of(resolve(catalog, Criteria(service="ocp")))


def _folder(bundle, name: str) -> str:
    return next(p.split("/")[0] for p in bundle.files if p.endswith(f"-{name}/Chart.yaml"))


def test_nfd_cr_renders_red_hats_instance_and_passes_its_crd_schema(
    catalog, ocp, helm, helm_env, tmp_path, crd_schema
) -> None:
    bundle = build(ocp, catalog, BundleOptions.parse("helm"))
    bundle.write(tmp_path)
    [cr] = _template(helm, helm_env, tmp_path / _folder(bundle, "nfd-ocp"), "nfd-ocp",
                     "openshift-nfd")  # fmt: skip
    worker = yaml.safe_load(cr["spec"]["workerConfig"]["configData"])
    cr["spec"]["workerConfig"]["configData"] = None
    assert cr == NFD_CR and worker == NFD_WORKER
    cr["spec"]["workerConfig"]["configData"] = "core: {}"
    jsonschema.validate(cr, crd_schema("nfd-nodefeaturediscovery"))


def test_cluster_policy_renders_the_certified_bundles_sample(
    catalog, ocp, helm, helm_env, tmp_path
) -> None:
    bundle = build(ocp, catalog, BundleOptions.parse("helm"))
    bundle.write(tmp_path)
    [cr] = _template(helm, helm_env, tmp_path / _folder(bundle, "gpu-operator-ocp"),
                     "gpu-operator-ocp", "gpu-operator")  # fmt: skip
    assert (cr["apiVersion"], cr["kind"]) == ("nvidia.com/v1", "ClusterPolicy")
    assert cr["metadata"] == {
        "name": "gpu-cluster-policy",  # cluster-scoped: no namespace
        "annotations": {"argocd.argoproj.io/sync-options": "SkipDryRunOnMissingResource=true"},
    }
    assert cr["spec"] == CLUSTER_POLICY_SPEC
    assert CLUSTER_POLICY_REQUIRED <= set(cr["spec"])


def test_deploy_sh_waits_for_each_crs_crd_before_installing_it(catalog, ocp, tmp_path) -> None:
    bundle = build(ocp, catalog, BundleOptions.parse("helm"))
    bundle.write(tmp_path)
    subprocess.run(["bash", "-n", str(tmp_path / "deploy.sh")], check=True)
    if shutil.which("shellcheck"):
        check = subprocess.run(["shellcheck", "--severity=style", str(tmp_path / "deploy.sh")],
                               capture_output=True, text=True)  # fmt: skip
        assert check.returncode == 0, check.stdout
    run = subprocess.run(
        [str(tmp_path / "deploy.sh"), "--dry-run"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    steps = [line for line in run.stdout.splitlines() if line.startswith("+ ")]
    installs = {
        s.split()[4]: i for i, s in enumerate(steps) if s.startswith("+ helm upgrade --install ")
    }
    for name, crd in CRDS.items():
        assert steps[installs[name] - 2 : installs[name]] == [
            f"+ kubectl wait --for=create crd/{crd} --timeout 10m",
            f"+ kubectl wait --for=condition=established crd/{crd} --timeout 10m",
        ]
    assert installs["nfd-ocp-olm"] < installs["nfd-ocp"] - 2  # the Subscription, then the wait
    assert installs["gpu-operator-ocp-olm"] < installs["gpu-operator-ocp"] - 2
    assert sum("kubectl wait" in s for s in steps) == 2 * len(CRDS)  # only the CRs wait


def test_argocd_orders_each_cr_after_its_subscription(catalog, ocp) -> None:
    bundle = build(
        ocp, catalog, BundleOptions.parse("argocd", repo_url="https://git.example.com/s.git")
    )
    waves = {}
    for path, data in bundle.files.items():
        if path.startswith("applications/"):
            app = yaml.safe_load(data)
            waves[app["metadata"]["name"]] = int(
                app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
            )
    assert (
        waves["nfd-ocp-olm"]
        < waves["nfd-ocp"]
        < waves["gpu-operator-ocp-olm"]
        < waves["gpu-operator-ocp"]
    )


def test_flux_cr_releases_depend_on_their_subscription_and_retry_until_the_crd(
    catalog, ocp
) -> None:
    bundle = build(
        ocp, catalog, BundleOptions.parse("flux", repo_url="https://git.example.com/s.git")
    )
    releases = {}
    for path, data in bundle.files.items():
        if path.startswith("releases/"):
            hr = yaml.safe_load(data)
            releases[hr["metadata"]["name"]] = hr["spec"]
    assert releases["nfd-ocp"]["dependsOn"] == [{"name": "nfd-ocp-olm"}]
    assert releases["gpu-operator-ocp"]["dependsOn"] == [{"name": "gpu-operator-ocp-olm"}]
    assert releases["gpu-operator-ocp-olm"]["dependsOn"] == [{"name": "nfd-ocp"}]
    retries = {n: s["install"]["remediation"]["retries"] for n, s in releases.items()}
    assert retries == {"nfd-ocp": -1, "gpu-operator-ocp": -1, "nfd-ocp-olm": 3,
                       "gpu-operator-ocp-olm": 3, "cert-manager-ocp-olm": 3}  # fmt: skip


def test_helmfile_waits_for_the_crds_in_presync_hooks_of_the_cr_releases(catalog, ocp) -> None:
    bundle = build(ocp, catalog, BundleOptions.parse("helmfile"))
    releases = {r["name"]: r for r in yaml.safe_load(bundle.files["helmfile.yaml"])["releases"]}
    for name, crd in CRDS.items():
        assert releases[name]["hooks"] == [
            {"events": ["presync"], "showlogs": True, "command": "kubectl",
             "args": ["wait", "--for=create", f"crd/{crd}", "--timeout", "10m"]},
            {"events": ["presync"], "showlogs": True, "command": "kubectl",
             "args": ["wait", "--for=condition=established", f"crd/{crd}", "--timeout", "10m"]},
        ]  # fmt: skip
    assert "hooks" not in releases["nfd-ocp-olm"]
    assert releases["nfd-ocp"]["needs"] == ["openshift-nfd/nfd-ocp-olm"]
