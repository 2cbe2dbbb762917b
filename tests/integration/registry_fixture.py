"""A real OCI registry (Debian's `docker-registry`, the CNCF Distribution registry) on loopback.

Started with a config of its own in a temp dir (filesystem storage, no auth, plain HTTP on a
free 127.0.0.1 port), ready once `GET /v2/` answers 200, stopped by its PID. A missing binary
fails the test with the package to install: .ci/run installs it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import ENV, free_port, stop, until


@dataclass
class Registry:
    workdir: Path
    port: int
    proc: subprocess.Popen

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``, as an ``oci://`` reference names the registry."""
        return f"127.0.0.1:{self.port}"

    def tags(self, repository: str) -> list[str]:
        resp = httpx.get(f"http://{self.host}/v2/{repository}/tags/list", timeout=5)
        resp.raise_for_status()
        return resp.json()["tags"]

    def log(self) -> str:
        return (self.workdir / "registry.log").read_text()


@pytest.fixture
def oci_registry(tmp_path: Path) -> Iterator[Registry]:
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        pytest.fail(
            "docker-registry not found on PATH: install Debian's `docker-registry` package "
            "(apt-get install -y --no-install-recommends docker-registry); .ci/run does"
        )
    workdir = tmp_path / "registry"
    workdir.mkdir()
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(workdir / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    (workdir / "config.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [binary, "serve", str(workdir / "config.yml")],
        stdout=(workdir / "registry.log").open("a"),
        stderr=subprocess.STDOUT,
        env=ENV,
    )
    registry = Registry(workdir, port, proc)
    try:
        until(
            lambda: httpx.get(f"http://{registry.host}/v2/", timeout=2).status_code == 200,
            timeout=20,
            what="the registry's /v2/",
        )
    except BaseException:
        stop(proc)
        print(registry.log())
        raise
    yield registry
    stop(proc)
