"""oci:// output: bundles pushed to a real registry on loopback and pulled back by real helm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import BIN, ENV, free_port
from helm_fixture import helm_path
from registry_fixture import oci_registry  # noqa: F401  (a fixture)

from plumb.aggregator.bundle import BundleOptions, OciRef, Recipe, build, push, verify
from plumb.aggregator.errors import Unavailable
from plumb.aggregator.recipes import Criteria, load_catalog, resolve

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_path()


@pytest.fixture
def helm_env(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """Helm confined to a temp dir (no user config, cache or registry logins), for the helm
    this test runs and the one `push` runs."""
    homes = {f"HELM_{k}_HOME": str(tmp_path / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}
    for name, value in homes.items():
        monkeypatch.setenv(name, value)
    return {**ENV, **homes}


def bundle_archive(deployer: str, chart: tuple[str, str]) -> bytes:
    catalog = load_catalog()
    recipe = Recipe.of(resolve(catalog, Criteria("eks", "h100", "ubuntu", "training", "kubeflow")))
    return build(recipe, catalog, BundleOptions.parse(deployer, chart=chart)).archive("tar.gz")


def pull(helm, helm_env, ref: str, version: str, dest: Path, *, untar: bool = True) -> Path:
    """``helm pull`` of ``ref`` into ``dest`` (made here), unpacked unless ``untar`` is False."""
    dest.mkdir(parents=True)
    args = [helm, "pull", ref, "--version", version, "--plain-http", "--destination", str(dest)]
    run = subprocess.run([*args, *(["--untar"] if untar else [])], env=helm_env,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return dest


def test_a_pushed_bundle_pulls_back_by_helm_and_verifies(
    oci_registry,  # noqa: F811
    helm,
    helm_env,
    tmp_path,
):
    ref = OciRef.parse(f"oci://{oci_registry.host}/plumb/gpu-stack:1.2.0")
    digest = push(bundle_archive("helm", ("gpu-stack", "1.2.0")), ref, helm=helm, plain_http=True)
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert oci_registry.tags("plumb/gpu-stack") == ["1.2.0"]
    folder = pull(helm, helm_env, f"oci://{oci_registry.host}/plumb/gpu-stack", "1.2.0",
                  tmp_path / "pulled") / "gpu-stack"  # fmt: skip
    verdict = verify(folder)
    assert verdict.problems == [] and (folder / "deploy.sh").is_file()
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"], chart["type"]) == ("gpu-stack", "1.2.0", "library")
    # A library chart: helm refuses to install the carrier; the bundle's deploy.sh deploys.
    run = subprocess.run([helm, "template", "x", str(folder)], env=helm_env, capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode != 0 and "library charts are not installable" in run.stderr


def test_an_argocd_helm_bundle_renders_straight_from_the_registry(
    oci_registry,  # noqa: F811
    helm,
    helm_env,
):
    ref = OciRef.parse(f"oci://{oci_registry.host}/gitops/gpu-apps:0.3.0")
    push(bundle_archive("argocd-helm", ("gpu-apps", "0.3.0")), ref, helm=helm, plain_http=True)
    run = subprocess.run(
        [helm, "template", "gpu-apps", f"oci://{oci_registry.host}/gitops/gpu-apps",
         "--version", "0.3.0", "--plain-http"],
        env=helm_env, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    apps = [d for d in yaml.safe_load_all(run.stdout) if d]
    assert {a["kind"] for a in apps} == {"Application"}
    assert "gpu-operator" in {a["metadata"]["name"] for a in apps}


def test_a_push_to_a_registry_that_is_not_there_is_unavailable(helm, helm_env):
    ref = OciRef.parse(f"oci://127.0.0.1:{free_port()}/plumb/gpu-stack:1.0.0")
    with pytest.raises(Unavailable, match="helm push to .* failed"):
        push(bundle_archive("helm", ("gpu-stack", "1.0.0")), ref, helm=helm, plain_http=True)


def test_cli_signs_pushes_and_the_pulled_archive_verifies_with_the_key(
    aggregator,
    oci_registry,  # noqa: F811
    helm,
    helm_env,
    tmp_path,
):
    key, pub = tmp_path / "bundle.key", tmp_path / "bundle.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    made = subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", aggregator.url, "--service", "gke",
         "--accelerator", "a100", "--os", "cos", "--intent", "training", "--deployer", "flux",
         "--repo-url", "https://git.example.com/gpu.git", "--sign-key", str(key),
         "-o", f"oci://{oci_registry.host}/plumb/gke-a100:2.0.0", "--plain-http", "--helm", helm],
        env=helm_env, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    pushed = f"files to oci://{oci_registry.host}/plumb/gke-a100:2.0.0\ndigest: sha256:"
    assert pushed in made.stderr
    pulled = pull(helm, helm_env, f"oci://{oci_registry.host}/plumb/gke-a100", "2.0.0",
                  tmp_path / "pulled", untar=False)  # fmt: skip
    (archive,) = pulled.glob("*.tgz")
    checked = subprocess.run(
        [str(BIN / "plumb"), "verify", str(archive), "--key", str(pub), "--min-trust-level",
         "verified"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert "trust level: verified" in checked.stdout


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("oci://127.0.0.1:5000/plumb/gpu-stack", "has no version tag"),
        ("oci://127.0.0.1:5000/plumb/Gpu_Stack:1.0.0", "not a Helm chart name"),
        ("oci://127.0.0.1:5000/plumb/gpu-stack:v1", "is not SemVer"),
    ],
)
def test_cli_refuses_a_bad_oci_reference_before_any_request(tmp_path, ref, message):
    run = subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", "http://127.0.0.1:9", "-o", ref],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 2 and message in run.stderr
