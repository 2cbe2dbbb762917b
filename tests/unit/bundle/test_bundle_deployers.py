"""Each deployer on several recipes: output parses, is complete, and passes real validators."""

from __future__ import annotations

import hashlib
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import yaml

from plumb.aggregator.bundle import check

DEPLOYERS = ("helm", "helmfile", "argocd", "argocd-helm", "flux")
SCHEMA = {
    "Application": "argocd-application",
    "HelmRelease": "flux-helmrelease",
    "HelmRepository": "flux-helmrepository",
    "GitRepository": "flux-gitrepository",
}


def documents(bundle) -> dict[str, list]:
    return {
        path: [d for d in yaml.safe_load_all(data) if d is not None]
        for path, data in bundle.files.items()
        if path.endswith(".yaml") and "templates/" not in path  # Helm templates are not YAML
    }


@pytest.mark.parametrize("deployer", DEPLOYERS)
def test_every_yaml_parses_and_checksums_cover_every_file(make_bundle, recipe, deployer):
    bundle = make_bundle(recipe, deployer)
    assert documents(bundle)
    digests = {path: hashlib.sha256(data).hexdigest() for path, data in bundle.files.items()}
    assert check(digests, bundle.files["checksums.txt"]) == []
    for common in ("README.md", "recipe.yaml", "facts.yaml", "checksums.txt"):
        assert common in bundle.files


def test_recipe_yaml_is_the_full_resolution(make_bundle, recipes, recipe):
    doc = yaml.safe_load(make_bundle(recipe, "helm").files["recipe.yaml"])
    assert doc == recipes[recipe].document
    assert {"criteria", "overlays", "content_hash"} <= set(doc)


@pytest.mark.parametrize("deployer", ["argocd", "flux"])
def test_custom_resources_match_their_vendored_crd_schemas(
    make_bundle, crd_schema, recipe, deployer
):
    kinds = set()
    for docs in documents(make_bundle(recipe, deployer)).values():
        for doc in docs:
            if doc.get("kind") in SCHEMA and "apiVersion" in doc:
                jsonschema.validate(doc, crd_schema(SCHEMA[doc["kind"]]))
                kinds.add(doc["kind"])
    assert kinds >= ({"Application"} if deployer == "argocd" else {"HelmRelease", "HelmRepository"})


def test_argocd_sync_waves_follow_the_deployment_order(make_bundle, recipes, recipe):
    bundle = make_bundle(recipe, "argocd")
    apps = {
        doc["metadata"]["name"]: int(doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
        for path, docs in documents(bundle).items()
        if path.startswith("applications/")
        for doc in docs
    }
    assert sorted(apps, key=apps.get) == list(recipes[recipe].deployment_order)
    assert "app-of-apps.yaml" in bundle.files


def test_flux_depends_on_and_helmfile_needs_name_real_releases(make_bundle, recipes, recipe):
    comps = {c.name: c for c in recipes[recipe].components if c.type != "operand"}
    releases = [
        doc
        for path, docs in documents(make_bundle(recipe, "flux")).items()
        if path.startswith("releases/")
        for doc in docs
    ]
    assert {r["metadata"]["name"] for r in releases} == set(comps)
    for r in releases:
        want = sorted(comps[r["metadata"]["name"]].dependencies)
        assert sorted(d["name"] for d in r["spec"].get("dependsOn", [])) == want
    helmfile = yaml.safe_load(make_bundle(recipe, "helmfile").files["helmfile.yaml"])
    names = {f"{r['namespace']}/{r['name']}" for r in helmfile["releases"]}
    repos = {r["name"] for r in helmfile["repositories"]}
    for release in helmfile["releases"]:
        assert set(release.get("needs", [])) <= names
        assert release["chart"].startswith("./") or release["chart"].split("/")[0] in repos
        assert release["chart"].startswith("./") or release["version"]


def test_helm_deploy_script_installs_in_order_and_undeploy_reverses(make_bundle, recipes, recipe):
    files = make_bundle(recipe, "helm").files
    order = list(recipes[recipe].deployment_order)

    def released(script: str) -> list[str]:
        lines = files[script].decode().splitlines()
        return [line.split()[1] for line in lines if line.startswith("release ")]

    assert released("deploy.sh") == order
    assert released("undeploy.sh") == order[::-1]
    for name in order:
        folder = next(p for p in files if p.endswith(f"-{name}/values.yaml"))
        assert folder.split("/")[0] in files["deploy.sh"].decode()


@pytest.mark.parametrize("deployer", DEPLOYERS)
def test_local_charts_render_to_manifests_that_pass_kubernetes_validate(
    make_bundle, helm, helm_env, tmp_path, deployer
):
    bundle = make_bundle("gke-a100-cos-training", deployer)
    bundle.write(tmp_path / "b")
    charts = sorted({p.split("/")[0] for p in bundle.files if p.endswith("/Chart.yaml")})
    assert charts, "the GKE COS recipe has a manifest component"
    for chart in charts:
        path = tmp_path / "b" / chart
        lint = subprocess.run(
            [helm, "lint", "--strict", str(path)], env=helm_env, capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
        rendered = subprocess.run(
            [helm, "template", chart, str(path), "-n", "kube-system"],
            env=helm_env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        objects = [d for d in yaml.safe_load_all(rendered) if d]
        assert objects
        for obj in objects:
            kubernetes_validate.validate(obj, "1.35", strict=True)


def test_facts_yaml_says_criteria_alone_without_facts(make_bundle, recipe):
    doc = yaml.safe_load(make_bundle(recipe, "helm").files["facts.yaml"])
    assert doc["facts"] is None and "criteria alone" in doc["note"]
