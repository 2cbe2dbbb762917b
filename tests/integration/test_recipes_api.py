"""Recipes over HTTP and the CLI, resolved from criteria and from live simulated nodes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import yaml
from conftest import BIN, ENV, until


def plumb(aggregator, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "plumb"), *args, "--server", aggregator.url],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "200"},
        timeout=60,
    )


def test_recipe_by_criteria_resolves_layered_overlays(aggregator):
    body = aggregator.json(
        "/v1/recipe", service="gke", accelerator="a100", os="cos", intent="training"
    )
    assert body["criteria"]["service"] == "gke"
    assert len(body["overlays"]["applied"]) >= 4  # base + at least 3 layers above it
    assert len(body["deployment_order"]) >= 12
    assert len(body["content_hash"]) == 64


def test_unknown_criteria_value_is_a_400_naming_the_allowed_values(aggregator):
    resp = aggregator.get("/v1/recipe", accelerator="tpu-v9")
    assert resp.status_code == 400
    assert resp.json()["code"] == "invalid_input"
    assert "h100" in resp.json()["message"]


def test_node_recipe_follows_the_nodes_facts(aggregator, start_agent):
    start_agent(aggregator, "eks-h100", "dgx-h100")
    until(lambda: aggregator.node("eks-h100"), what="the node")
    body = aggregator.json("/v1/nodes/eks-h100/recipe")
    assert body["criteria"]["accelerator"] == "h100"
    assert body["criteria"]["service"] == "eks"
    posted = httpx.post(f"{aggregator.url}/v1/recipe", json={"node": "eks-h100"}).json()
    assert posted["content_hash"] == body["content_hash"]


def test_post_recipe_needs_exactly_one_of_criteria_or_node(aggregator):
    resp = httpx.post(f"{aggregator.url}/v1/recipe", json={})
    assert resp.status_code == 400
    assert "exactly one" in resp.json()["message"]


AICR = Path(__file__).parents[1] / "data" / "real" / "aicr"


def test_post_recipe_takes_aicrs_recipe_criteria_body(aggregator):
    # AICR's own criteria.json (tests/data/real/aicr): gke / a100 / ubuntu / inference.
    body = json.loads((AICR / "criteria.json").read_text())
    posted = httpx.post(f"{aggregator.url}/v1/recipe", json=body)
    assert posted.status_code == 200, posted.text
    got = aggregator.json(
        "/v1/recipe", service="gke", accelerator="a100", os="ubuntu", intent="inference"
    )
    assert posted.json()["content_hash"] == got["content_hash"]
    for name, says in [
        ("invalid-kind.yaml", "expected kind RecipeCriteria"),
        ("invalid-version.yaml", "unsupported apiVersion"),
        ("invalid-enum.yaml", "unknown service 'invalid-service'"),
    ]:
        bad = httpx.post(
            f"{aggregator.url}/v1/recipe", json=yaml.safe_load((AICR / name).read_text())
        )
        assert bad.status_code == 400, name
        assert bad.json()["code"] == "invalid_input" and says in bad.json()["message"]
        assert bad.json()["hint"]


def test_post_recipe_resolves_an_aicr_snapshot(aggregator):
    # The real EKS H100 snapshot: eks / h100 / ubuntu; the training intent comes from the caller.
    doc = yaml.safe_load((AICR / "cns_snapshot_h100.yaml").read_text())
    body = {"snapshot": doc, "criteria": {"intent": "training"}}
    posted = httpx.post(f"{aggregator.url}/v1/recipe", json=body).json()
    assert posted["criteria"] == {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "any",
        "nodes": 0,
    }
    wrong = httpx.post(f"{aggregator.url}/v1/recipe", json={"snapshot": {"kind": "Pod"}})
    assert wrong.status_code == 400 and "expected kind Snapshot" in wrong.json()["message"]


def test_query_selects_one_value(aggregator):
    version = aggregator.json(
        "/v1/query",
        selector="components.gpu-operator.version",
        service="eks",
        accelerator="h100",
    )["value"]
    recipe = aggregator.json("/v1/recipe", service="eks", accelerator="h100")
    expected = next(c for c in recipe["components"] if c["name"] == "gpu-operator")["version"]
    assert version == expected
    missing = aggregator.get("/v1/query", selector="components.no-such-thing.version")
    assert missing.status_code == 404


def test_cli_recipe_and_query(aggregator):
    table = plumb(
        aggregator,
        "recipe",
        "--service",
        "gke",
        "--accelerator",
        "a100",
        "--os",
        "cos",
        "--intent",
        "training",
    )
    assert table.returncode == 0, table.stderr
    assert "gpu-operator" in table.stdout and "applied" in table.stdout
    as_yaml = plumb(aggregator, "recipe", "--service", "eks", "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout)["criteria"]["service"] == "eks"
    value = plumb(aggregator, "query", "components.gpu-operator.namespace", "--service", "eks")
    assert value.returncode == 0, value.stderr
    assert value.stdout.strip()
    bad = plumb(aggregator, "recipe", "--accelerator", "tpu-v9")
    assert bad.returncode == 2  # refused by the CLI itself, naming what is valid
    assert "'tpu-v9'" in bad.stderr and "valid:" in bad.stderr and "h100" in bad.stderr


def test_the_aggregator_refuses_to_start_on_a_broken_recipe_file(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(Path(__file__).resolve().parents[2] / "recipes", recipes)
    (recipes / "overlays" / "eks.yaml").write_text("kind: Overlay\nname: eks\nbase: [unclosed\n")
    result = subprocess.run(
        [
            str(BIN / "plumb"),
            "serve",
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--db",
            f"sqlite:///{tmp_path}/x.db",
        ],
        capture_output=True,
        text=True,
        env={**ENV, "PLUMB_RECIPES__DIR": str(recipes)},
        timeout=60,
    )
    assert result.returncode != 0
    assert "eks.yaml" in result.stderr
    assert "Traceback" not in result.stderr
