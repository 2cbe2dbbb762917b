"""--vendor-charts: charts pulled by real helm from a real OCI registry on loopback, carried in
the bundle, and rendered by helm from the bundle alone.

The chart is made here by ``helm create`` (its defaults: a Deployment named after the release,
``replicaCount: 1``) and pushed to Debian's docker-registry; the recipe names it as the source
of its one component, as a site mirror would.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import BIN, ENV, free_port
from helm_fixture import helm_path
from registry_fixture import oci_registry  # noqa: F401  (a fixture)

from plumb.aggregator.bundle import verify

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_path()


@pytest.fixture
def helm_env(tmp_path: Path) -> dict[str, str]:
    """Helm confined to a temp dir (no user config, cache or registry logins)."""
    homes = {f"HELM_{k}_HOME": str(tmp_path / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}
    return {**ENV, **homes}


def helm_run(helm: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    run = subprocess.run([helm, *args], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run


def recipe_file(tmp_path: Path, source: str, version: str) -> Path:
    """A one-component recipe whose chart is the one in the test registry (nfd: a registry
    name, so the bundle knows its description and placement paths)."""
    recipe = {
        "criteria": {"service": "any", "accelerator": "any", "os": "any", "intent": "any"},
        "components": [
            {
                "name": "nfd",
                "type": "helm",
                "source": source,
                "chart": "demo",
                "version": version,
                "namespace": "nfd",
                "values": {"replicaCount": 3},
            },
        ],  # fmt: skip
        "deployment_order": ["nfd"],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


@pytest.fixture
def registry_chart(oci_registry, helm, helm_env, tmp_path) -> str:  # noqa: F811
    """``oci://HOST/charts``, holding chart ``demo`` 1.0.0."""
    helm_run(helm, helm_env, "create", str(tmp_path / "demo"))
    helm_run(helm, helm_env, "package", str(tmp_path / "demo"), "--version", "1.0.0",
             "--destination", str(tmp_path))  # fmt: skip
    source = f"oci://{oci_registry.host}/charts"
    helm_run(helm, helm_env, "push", str(tmp_path / "demo-1.0.0.tgz"), source, "--plain-http")
    return source


def bundle(helm, helm_env, recipe: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "plumb"), "bundle", "--recipe", str(recipe), "--vendor-charts",
         "--plain-http", "--helm", helm, "-o", str(out), *extra],
        env=helm_env, capture_output=True, text=True,
    )  # fmt: skip


def test_a_vendored_bundle_renders_its_chart_with_no_registry(
    registry_chart,
    oci_registry,  # noqa: F811
    helm,
    helm_env,
    tmp_path,  # noqa: F811
):
    out = tmp_path / "bundle"
    made = bundle(helm, helm_env, recipe_file(tmp_path, registry_chart, "1.0.0"), out)
    assert made.returncode == 0, made.stderr
    assert f"pulling chart 1/1: demo 1.0.0 from {registry_chart} (nfd)" in made.stderr
    assert verify(out).problems == []
    listed = yaml.safe_load((out / "charts.yaml").read_text())["charts"]
    assert [(c["file"], c["source"], c["version"]) for c in listed] == [
        ("001-nfd/chart.tgz", registry_chart, "1.0.0")
    ]
    oci_registry.proc.terminate()  # from here on nothing can be pulled: the bundle suffices
    oci_registry.proc.wait(timeout=15)
    rendered = helm_run(helm, helm_env, "template", "nfd", str(out / "001-nfd" / "chart.tgz"),
                        "--values", str(out / "001-nfd" / "values.yaml"))  # fmt: skip
    deployment = next(
        d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "Deployment"
    )
    assert deployment["spec"]["replicas"] == 3  # the recipe's value, over the chart's 1
    dry = subprocess.run([str(out / "deploy.sh"), "--dry-run"], capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "+ helm upgrade --install nfd ./001-nfd/chart.tgz --namespace nfd" in dry.stdout


def test_a_chart_that_cannot_be_pulled_is_named_with_what_to_do(
    registry_chart, helm, helm_env, tmp_path
):
    made = bundle(helm, helm_env, recipe_file(tmp_path, registry_chart, "9.9.9"), tmp_path / "b")
    assert made.returncode == 5, made.stderr
    assert f"helm pull of demo 9.9.9 from {registry_chart} (nfd) failed" in made.stderr
    assert "--plain-http" in made.stderr and "--data" in made.stderr
    assert not (tmp_path / "b").exists()


def test_the_aggregator_refuses_to_pull_charts(aggregator):
    import httpx

    body = {"criteria": {"service": "eks"}, "vendor_charts": True}
    resp = httpx.post(f"{aggregator.url}/v1/bundles", json=body, timeout=30)
    assert resp.status_code == 400 and "does not fetch charts" in resp.json()["message"]
    assert "plumb bundle --vendor-charts" in resp.json()["hint"]


def test_vendor_charts_with_a_node_is_refused_before_any_pull(tmp_path):
    run = subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", f"http://127.0.0.1:{free_port()}",
         "--node", "gpu-1", "--vendor-charts", "-o", str(tmp_path / "b")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 2 and "plumb recipe --node N -o yaml" in run.stderr
