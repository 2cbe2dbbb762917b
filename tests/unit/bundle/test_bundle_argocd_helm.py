"""argocd-helm: the bundle is a chart that real helm lints and renders into valid Applications."""

from __future__ import annotations

import subprocess

import jsonschema
import pytest
import yaml

REPO = "https://git.example.com/gpu-stack.git"


def render(helm, helm_env, path, *args: str, repo: str | None = REPO):
    """``helm template`` of the bundle, with ``--set repoURL=repo`` unless repo is None."""
    repo_args = ["--set", f"repoURL={repo}"] if repo else []
    return subprocess.run(
        [helm, "template", "gpu-stack", str(path), "-n", "argocd", *repo_args, *args],
        env=helm_env, capture_output=True, text=True,
    )  # fmt: skip


def applications(stdout: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(stdout) if d}


@pytest.fixture
def written(make_bundle, tmp_path):
    def write(recipe: str = "gke-a100-cos-training", **opts):
        make_bundle(recipe, "argocd-helm", repo_url=None, **opts).write(tmp_path / "b")
        return tmp_path / "b"

    return write


def test_the_bundle_passes_helm_lint_strict(written, helm, helm_env):
    lint = subprocess.run(
        [helm, "lint", "--strict", str(written()), "--set", f"repoURL={REPO}"],
        env=helm_env, capture_output=True, text=True,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_each_release_renders_to_an_application_in_deployment_order(
    written, helm, helm_env, recipes, crd_schema, recipe
):
    run = render(helm, helm_env, written(recipe))
    assert run.returncode == 0, run.stderr
    apps = applications(run.stdout)
    for app in apps.values():
        jsonschema.validate(app, crd_schema("argocd-application"))
    wave = "argocd.argoproj.io/sync-wave"
    waves = {n: int(a["metadata"]["annotations"][wave]) for n, a in apps.items()}
    assert sorted(waves, key=waves.get) == list(recipes[recipe].deployment_order)
    assert sorted(waves.values()) == list(range(1, len(waves) + 1))


def test_an_upstream_chart_is_a_pinned_helm_source_with_its_values(written, helm, helm_env):
    app = applications(render(helm, helm_env, written()).stdout)["gpu-operator"]
    # recipes/registry.yaml: gpu-operator v26.7.0 from NVIDIA's Helm repository; the toolkit
    # operand's env lands in the parent chart's values under `toolkit`.
    source = app["spec"]["source"]
    assert {k: source[k] for k in ("repoURL", "chart", "targetRevision")} == {
        "repoURL": "https://helm.ngc.nvidia.com/nvidia",
        "chart": "gpu-operator",
        "targetRevision": "v26.7.0",
    }
    assert source["helm"]["releaseName"] == "gpu-operator"
    assert source["helm"]["valuesObject"]["toolkit"]["env"] == {"RUNTIME_CONFIG_SOURCE": "file"}
    assert app["spec"]["destination"] == {
        "server": "https://kubernetes.default.svc",
        "namespace": "gpu-operator",
    }
    assert app["metadata"]["namespace"] == "argocd"


def test_an_oci_chart_source_drops_the_scheme_as_argo_cd_wants(written, helm, helm_env):
    app = applications(render(helm, helm_env, written("eks-h100-training")).stdout)[
        "nodewright-operator"
    ]
    assert app["spec"]["source"]["repoURL"] == "ghcr.io/nvidia/nodewright/charts"


def test_a_local_chart_is_read_from_the_bundle_repo_given_at_install(written, helm, helm_env):
    path = written()
    run = render(helm, helm_env, path, "--set", "targetRevision=v2")
    source = applications(run.stdout)["gcp-driver-installer"]["spec"]["source"]
    folder = source["path"]
    assert folder.endswith("-gcp-driver-installer") and (path / folder / "Chart.yaml").is_file()
    assert (source["repoURL"], source["targetRevision"]) == (REPO, "v2")


def test_a_local_chart_without_repo_url_fails_the_install_saying_so(written, helm, helm_env):
    run = render(helm, helm_env, written(), repo=None)
    assert run.returncode != 0
    assert "repoURL: the Git repository of this bundle" in run.stderr


def test_a_recipe_without_local_charts_installs_without_repo_url(written, helm, helm_env):
    run = render(helm, helm_env, written("eks-h100-training"), repo=None)
    assert run.returncode == 0, run.stderr


def test_release_values_can_be_changed_at_install_time(written, helm, helm_env):
    run = render(
        helm, helm_env, written(), "--set", "releases.gpu-operator.values.mig.strategy=mixed"
    )
    values = applications(run.stdout)["gpu-operator"]["spec"]["source"]["helm"]["valuesObject"]
    assert values["mig"]["strategy"] == "mixed"


def test_recipe_values_pass_through_verbatim_never_as_templates(written, helm, helm_env):
    text = '{{ fail "evaluated" }} and {{ .Release.Name }}'
    path = written(set_file={"gpu-operator:toolkit.note": text})
    run = render(helm, helm_env, path)
    assert run.returncode == 0, run.stderr
    values = applications(run.stdout)["gpu-operator"]["spec"]["source"]["helm"]["valuesObject"]
    assert values["toolkit"]["note"] == text
