"""Bundles over HTTP and the CLI, from a simulated node's live facts, verified offline."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile

import httpx
import pytest
import yaml
from conftest import BIN, until

from plumb.aggregator.bundle import verify

pytestmark = pytest.mark.integration


def post(aggregator, **body) -> httpx.Response:
    return httpx.post(aggregator.url + "/v1/bundles", json=body, timeout=30)


def test_bundle_for_a_live_node_carries_its_facts_and_verifies(aggregator, start_agent, tmp_path):
    start_agent(aggregator, "gke-a100-1", "hgx-a100")
    until(lambda: aggregator.node("gke-a100-1"), what="node gke-a100-1")
    resp = post(aggregator, node="gke-a100-1", deployer="helm")
    assert resp.status_code == 200, resp.text
    data = resp.content
    assert resp.headers["X-Bundle-Sha256"] == hashlib.sha256(data).hexdigest()
    assert int(resp.headers["X-Bundle-Size"]) == len(data)
    assert "attachment" in resp.headers["Content-Disposition"]
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(data)
    verdict = verify(archive)
    assert verdict.problems == [] and verdict.checked == int(resp.headers["X-Bundle-Files"])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        facts_member = next(m for m in tar.getmembers() if m.name.endswith("/facts.yaml"))
        facts = yaml.safe_load(tar.extractfile(facts_member).read())  # type: ignore[union-attr]
    assert facts["node"] == "gke-a100-1"
    assert facts["facts"]["host"]["os_id"]["value"] == "cos"


def test_cli_bundle_then_verify_and_tamper(aggregator, start_agent, tmp_path):
    start_agent(aggregator, "gke-a100-2", "hgx-a100")
    until(lambda: aggregator.node("gke-a100-2"), what="node gke-a100-2")
    out = tmp_path / "out"
    subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", aggregator.url, "--node", "gke-a100-2",
         "--deployer", "helm", "-o", str(out)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert (out / "deploy.sh").stat().st_mode & 0o111
    ok = subprocess.run([str(BIN / "plumb"), "verify", str(out)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    (out / "README.md").write_text((out / "README.md").read_text() + " ")
    bad = subprocess.run([str(BIN / "plumb"), "verify", str(out)], capture_output=True, text=True)
    assert bad.returncode == 1 and "README.md: mismatch" in bad.stderr


def test_cli_bundle_carries_json_file_nodes_and_storage_class(aggregator, tmp_path):
    config = tmp_path / "toolkit.toml"
    config.write_text("[plugins]\n  enabled = true\n")
    out = tmp_path / "out"
    run = subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", aggregator.url, "--service", "gke",
         "--accelerator", "a100", "--os", "cos", "--intent", "training", "-o", str(out),
         "--set-json", 'gpu-operator:toolkit={"env": {"A": "1"}}',
         "--set-file", f"gpu-operator:toolkit.config={config}",
         "--nodes", "8", "--storage-class", "premium-rwo"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr

    def values(component: str) -> dict:
        return yaml.safe_load(next(out.glob(f"*-{component}/values.yaml")).read_text())

    toolkit = values("gpu-operator")["toolkit"]
    assert toolkit["env"] == {"RUNTIME_CONFIG_SOURCE": "file", "A": "1"}
    assert toolkit["config"] == "[plugins]\n  enabled = true\n"
    assert values("nodewright-operator")["estimatedNodeCount"] == 8
    prometheus = values("kube-prometheus-stack")["prometheus"]["prometheusSpec"]
    assert prometheus["storageSpec"]["volumeClaimTemplate"]["spec"] == {
        "storageClassName": "premium-rwo"
    }


def test_cli_set_file_of_a_missing_file_exits_2_naming_it(aggregator, tmp_path):
    run = subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", aggregator.url, "-o", str(tmp_path / "o"),
         "--set-file", f"gpu-operator:toolkit.config={tmp_path / 'absent.toml'}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 2 and "absent.toml" in run.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("output", ["signed.zip", "signed"])
def test_cli_signs_with_a_local_key_and_verify_checks_it(aggregator, tmp_path, output):
    key, pub = tmp_path / "bundle.key", tmp_path / "bundle.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    out = tmp_path / output
    made = subprocess.run(
        [str(BIN / "plumb"), "bundle", "--server", aggregator.url, "--service", "eks",
         "--accelerator", "h100", "--intent", "training", "--sign-key", str(key), "-o", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    checked = subprocess.run(
        [str(BIN / "plumb"), "verify", str(out), "--key", str(pub), "--min-trust-level",
         "verified"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert "trust level: verified" in checked.stdout


def test_same_criteria_give_the_same_archive(aggregator):
    body = {"criteria": {"service": "eks", "accelerator": "h100", "intent": "training"}}
    first, second = post(aggregator, **body, format="zip"), post(aggregator, **body, format="zip")
    assert first.status_code == 200, first.text
    assert first.content == second.content


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"criteria": {}, "deployer": "kustomize"}, "unknown deployer"),
        ({"criteria": {}, "set": ["gpu-operator:nope.x=1"]}, "has no value"),
        ({"recipe": "components: [unclosed"}, "does not parse"),
        ({"criteria": {}, "node": "x"}, "exactly one of"),
        ({"criteria": {}, "set_json": ["gpu-operator:mig={bad"]}, "the value is not JSON"),
        ({"criteria": {}, "set_file": {"gpu-operator:nope.x": "t"}}, "has no map 'nope'"),
        ({"criteria": {}, "storage_class": "Premium_RWO"}, "is not a StorageClass name"),
        ({"criteria": {}, "nodes": -1}, "nodes"),
        ({"criteria": {}, "chart": {"name": "GPU", "version": "1.0.0"}}, "a Helm chart name"),
    ],
)
def test_bad_bundle_input_is_a_client_error_saying_why(aggregator, body, message):
    resp = post(aggregator, **body)
    assert 400 <= resp.status_code < 500  # 400 once invalid_input maps to it; 422 before
    assert resp.json()["code"] == "invalid_input" and message in resp.json()["message"]
