"""Fixtures for bundles: the catalog, recipes for several environments, real tools when present."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from helm_fixture import helm_path

from plumb.aggregator.bundle import Bundle, BundleOptions, Recipe, build
from plumb.aggregator.recipes import Catalog, Criteria, load_catalog, resolve

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = Path(__file__).resolve().parent / "schemas"
AS_OF = dt.date(2026, 9, 1)
REPO = "https://git.example.com/gpu-stack.git"

RECIPES = {
    "gke-a100-cos-training": Criteria("gke", "a100", "cos", "training"),
    "gke-l4-cos-inference": Criteria("gke", "l4", "cos", "inference"),
    "eks-h100-training": Criteria("eks", "h100", "ubuntu", "training", "kubeflow"),
    "aks-h100-inference": Criteria("aks", "h100", "ubuntu", "inference", "dynamo"),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that takes ``recipe`` once per recipe of RECIPES."""
    if "recipe" in metafunc.fixturenames:
        metafunc.parametrize("recipe", list(RECIPES))


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="session")
def recipes(catalog: Catalog) -> dict[str, Recipe]:
    return {name: Recipe.of(resolve(catalog, c)) for name, c in RECIPES.items()}


@pytest.fixture(scope="session")
def make_bundle(catalog: Catalog, recipes: dict[str, Recipe]) -> Callable[..., Bundle]:
    def make(recipe: str = "gke-a100-cos-training", deployer: str = "helm", **opts) -> Bundle:
        opts.setdefault("repo_url", REPO)
        return build(recipes[recipe], catalog, BundleOptions.parse(deployer, **opts))

    return make


@pytest.fixture(scope="session")
def helm() -> str:
    """A real helm (tests/helm_fixture.py)."""
    return helm_path()


@pytest.fixture
def helm_env(tmp_path: Path) -> dict[str, str]:
    """Helm confined to a temp dir: no user config, cache or plugins."""
    return {
        **os.environ,
        **{f"HELM_{k}_HOME": str(tmp_path / k.lower()) for k in ("CACHE", "CONFIG", "DATA")},
    }


@pytest.fixture(scope="session")
def crd_schema() -> Callable[[str], dict]:
    """A vendored CRD schema by file stem, closed like an API server's strict field validation."""
    return lambda name: _closed(yaml.safe_load((SCHEMAS / f"{name}.yaml").read_text()))


def _closed(node: dict) -> dict:
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        node.setdefault("additionalProperties", False)
    for sub in node.get("properties", {}).values():
        _closed(sub)
    if isinstance(node.get("items"), dict):
        _closed(node["items"])
    return node
