"""Fixtures for the chart tests: a real helm binary and a renderer returning parsed objects.

helm is a local, offline tool (scripts/install-helm.sh caches a static build outside the repo);
when it cannot be had, these tests skip and say why.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_cases import CHART, find
from helm_fixture import helm_path


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., subprocess.CompletedProcess]:
    """Run helm with throwaway config/cache/data dirs; skip when it cannot be installed."""
    binary = helm_path()
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [binary, *args], capture_output=True, text=True, env=env, timeout=60
        )
        if check and result.returncode != 0:
            pytest.fail(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run


@pytest.fixture(scope="session")
def values_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], Path]:
    """Write a values dict to a fresh file for -f."""
    directory = tmp_path_factory.mktemp("values")
    counter = iter(range(1_000_000))

    def write(values: dict[str, Any]) -> Path:
        path = directory / f"values-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(values))
        return path

    return write


class UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a mapping with a key twice: PyYAML keeps the last silently,
    the API server warns or refuses, and a label given twice is a template bug."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        keys = [self.construct_object(k, deep=True) for k, _ in node.value]
        twice = sorted({str(k) for k in keys if keys.count(k) > 1})
        if twice:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate keys {twice}", node.start_mark
            )
        return super().construct_mapping(node, deep=deep)


def parse(text: str) -> list[dict[str, Any]]:
    """Rendered manifests as objects; a duplicated key anywhere fails."""
    return [doc for doc in yaml.load_all(text, Loader=UniqueKeyLoader) if doc]


@pytest.fixture(scope="session")
def render(
    helm: Callable[..., subprocess.CompletedProcess], values_file: Callable[[dict[str, Any]], Path]
) -> Callable[..., list[dict[str, Any]]]:
    """`helm template` the chart and return its objects, parsed."""

    def run(
        values: dict[str, Any] | None = None,
        api_versions: Sequence[str] = (),
        namespace: str = "plumb",
        kube_version: str | None = None,
    ) -> list[dict[str, Any]]:
        args = ["template", "plumb", str(CHART), "--namespace", namespace]
        if kube_version:
            args += ["--kube-version", kube_version]
        if values:
            args += ["-f", str(values_file(values))]
        for api in api_versions:
            args += ["--api-versions", api]
        return parse(helm(*args).stdout)

    return run


@pytest.fixture(scope="session")
def find_object() -> Callable[..., dict[str, Any]]:
    return find
