"""The built wheel, installed into fresh venvs: the agent alone, and with the aggregator extra;
and the Dockerfile's two images, which install that wheel the same two ways.

Offline: the wheel installs with --no-deps, and each venv reaches exactly the distributions its
extras need (resolved from the wheel's own metadata) through a .pth file onto links into this
venv's site-packages, so the agent-only venv really lacks the aggregator's dependencies. No
image is built here (no container daemon): the Dockerfile is read for what each target installs.
"""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from conftest import stop, until
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from ports import free_port
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# What the sdist of a checkout holds: everything the build reads.
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "agent", "aggregator", "proto", "recipes")

# Dockerfile target: (the extras its venv installs, the command it runs).
IMAGES = {"agent": ("", "plumb-agent"), "aggregator": ("[aggregator]", "plumb")}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel` of a clean copy of the checkout (so no build/ lands in the repository)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(src))
    (built,) = out.glob("plumb-*.whl")
    return built


def pip(*args: str, python: Path | None = None) -> None:
    target = ["--python", str(python)] if python else []
    cmd = [sys.executable, "-m", "pip", *target, "--disable-pip-version-check", "-q", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"pip {' '.join(args)}:\n{result.stdout}\n{result.stderr}"


def needed(requires: list[str] | None, extras: frozenset[str]) -> list[Requirement]:
    """The requirements among `requires` that apply on this interpreter with `extras` asked."""
    reqs = [Requirement(line) for line in requires or ()]
    return [
        r
        for r in reqs
        if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in {"", *extras})
    ]


def closure(wheel_file: Path, extras: frozenset[str]) -> list[metadata.Distribution]:
    """Every installed distribution the wheel needs with `extras`, from its METADATA."""
    with zipfile.ZipFile(wheel_file) as whl:
        name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        requires = email.message_from_bytes(whl.read(name)).get_all("Requires-Dist")
    todo = needed(requires, extras)
    found: dict[str, metadata.Distribution] = {}
    visited: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in visited:
            continue
        visited.add(key)
        dist = found.setdefault(key[0], metadata.distribution(req.name))
        todo += needed(dist.requires, key[1])
    return list(found.values())


def fresh_venv(where: Path, wheel_file: Path, extras: frozenset[str]) -> Path:
    """A venv with only the wheel in it and links to the dependencies `extras` need."""
    venv.create(where / "venv", with_pip=False)
    python = where / "venv" / "bin" / "python"
    pip("install", "--no-deps", "--no-index", str(wheel_file), python=python)
    deps = where / "deps"
    deps.mkdir()
    for dist in closure(wheel_file, extras):
        base = Path(dist.locate_file(""))
        tops = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops - {"__pycache__"}:
            if (base / top).exists() and not top.endswith(".pth") and not (deps / top).exists():
                (deps / top).symlink_to(base / top)
    (site,) = (where / "venv" / "lib").glob("python3*/site-packages")
    (site / "plumb-test-deps.pth").write_text(f"{deps}\n")
    return python.parent


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without PLUMB_* and PYTHON* settings, so only the venv decides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLUMB_", "PYTHON"))}
    return {**env, **extra}


def run(bin_dir: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=clean_env(**env),
    )


def serve_args(tmp_path: Path, http_port: int) -> list[str]:
    return [
        "serve",
        "--grpc-listen",
        f"127.0.0.1:{free_port()}",
        "--http-listen",
        f"127.0.0.1:{http_port}",
        "--db",
        f"sqlite:///{tmp_path / 'plumb.db'}",
    ]


@pytest.fixture(scope="module")
def agent_only(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("agent-only"), wheel, frozenset())


@pytest.fixture(scope="module")
def with_aggregator(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("aggregator"), wheel, frozenset({"aggregator"}))


def test_the_wheel_holds_the_license_and_the_recipes(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert f"plumb-{VERSION}.dist-info/licenses/LICENSE" in names
    assert "plumb/recipes/registry.yaml" in names
    assert "plumb/recipes/knowledge/gpus.yaml" in names
    assert not [n for n in names if n.startswith(("agent/", "aggregator/", "recipes/"))]


def test_agent_alone_runs_and_says_its_version(agent_only, tmp_path):
    assert run(agent_only, "plumb-agent", "--version", cwd=tmp_path).stdout == (
        f"plumb-agent {VERSION}\n"
    )
    result = run(agent_only, "plumb-agent", "--simulate", "l4", "--once", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["node_name"] == "sim-l4"


def test_the_agent_alone_has_none_of_the_aggregator_s_dependencies(agent_only, tmp_path):
    for module in ("fastapi", "sqlalchemy", "uvicorn", "prometheus_client", "typer"):
        check = run(agent_only, "python", "-c", f"import {module}", cwd=tmp_path)
        assert "ModuleNotFoundError" in check.stderr, module


def dockerfile_stages() -> dict[str, list[str]]:
    """The Dockerfile's stages by name: each a list of instructions, continuations joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if match := re.fullmatch(r"FROM (\S+) AS (\S+)", line):
            lines = stages[match[2]] = [line]
        else:
            lines.append(line)
    return stages


def from_of(stage: list[str]) -> str:
    return stage[0].split()[1]


@pytest.mark.parametrize("target", IMAGES)
def test_each_image_installs_the_wheel_with_its_own_extras(target):
    extras, command = IMAGES[target]
    stages = dockerfile_stages()
    image = stages[target]
    (copy,) = [i for i in image if i.startswith("COPY --from=")]
    venv_stage = stages[copy.split()[1].removeprefix("--from=")]
    assert copy.split()[2:] == ["/opt/plumb", "/opt/plumb"]
    installs = [i for i in venv_stage if "pip install" in i]
    assert installs, venv_stage
    # The wheel ("$1", set to its path) is the one thing installed, with exactly these extras.
    assert re.findall(r"pip install (\S+)", " ".join(installs)) == [f'"$1{extras}"']
    assert f'ENTRYPOINT ["{command}"]' in image
    # Non-root with the uid and gid the chart's runAsUser and runAsGroup name.
    assert "USER 65532:65532" in image


def test_every_image_is_pinned_labelled_and_built_from_what_the_build_context_holds():
    stages = dockerfile_stages()
    text = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG BASE=(\S+)$", text, re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", base), base
    for name, stage in stages.items():
        assert from_of(stage) == "${BASE}" or from_of(stage) in stages, name
    runtime = stages["runtime"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f'org.opencontainers.image.licenses="{project["license"]}"' in " ".join(runtime)
    for target in IMAGES:
        assert from_of(stages[target]) == "runtime"
        labels = " ".join(i for i in stages[target] + runtime if i.startswith("LABEL"))
        keys = set(re.findall(r"org\.opencontainers\.image\.(\w+)=", labels))
        assert keys == {"source", "version", "revision", "licenses", "title", "description"}
    assert 'org.opencontainers.image.version="${VERSION}"' in " ".join(runtime)
    # `make images` fills VERSION from pyproject.toml and REVISION from git.
    assert "--build-arg VERSION=$(VERSION)" in (ROOT / "Makefile").read_text()
    # The build context (.dockerignore: everything but a list) holds what the Dockerfile copies.
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = {
        src
        for stage in stages.values()
        for i in stage
        if i.startswith("COPY ") and "--from=" not in i
        for src in i.split()[1:-1]
    }
    assert copied == allowed == set(SOURCES)


def test_plumb_without_the_extra_names_the_extra_to_install(agent_only, tmp_path):
    check = run(agent_only, "python", "-c", "import httpx", cwd=tmp_path)
    assert check.returncode == 1  # the venv really lacks the aggregator's dependencies
    result = run(agent_only, "plumb", "nodes", cwd=tmp_path)
    assert result.returncode == 1
    assert "hint: pip install 'plumb[aggregator]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_plumb_serve_answers_readyz_with_the_shipped_recipes(with_aggregator, tmp_path):
    assert run(with_aggregator, "plumb", "--version", cwd=tmp_path).stdout == f"plumb {VERSION}\n"
    where = run(
        with_aggregator,
        "python",
        "-c",
        "from plumb.aggregator.recipes.catalog import default_root; print(default_root())",
        cwd=tmp_path,
    )
    recipes = Path(where.stdout.strip())  # <venv>/lib/python3.X/site-packages/plumb/recipes
    assert recipes.is_relative_to(with_aggregator.parent)
    assert recipes.parts[-3:] == ("site-packages", "plumb", "recipes")
    assert (recipes / "registry.yaml").is_file()
    http_port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                str(with_aggregator / "plumb"),
                *serve_args(tmp_path, http_port),
                "--log-format",
                "json",
            ],
            cwd=tmp_path,
            stderr=log,
            env=clean_env(),
        )

    def ready() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"plumb serve exited with {proc.returncode}:\n{log_path.read_text()}")
        return httpx.get(f"http://127.0.0.1:{http_port}/readyz").is_success

    try:
        until(ready, timeout=30, what="plumb serve from the wheel to answer /readyz")
    finally:
        stop(proc)
    lines = log_path.read_text().splitlines()
    assert lines, "plumb serve logged nothing"
    assert all(json.loads(line)["level"] for line in lines)


def test_plumb_recipes_dir_still_overrides_the_shipped_recipes(with_aggregator, tmp_path):
    missing = tmp_path / "no-recipes"
    result = run(
        with_aggregator,
        "plumb",
        *serve_args(tmp_path, free_port()),
        cwd=tmp_path,
        PLUMB_RECIPES__DIR=str(missing),
        COLUMNS="1000",  # one line per message
    )
    assert result.returncode != 0
    assert f"recipe directory not found: {missing}" in result.stderr


def test_a_fresh_venv_from_the_wheel_runs_the_demo(with_aggregator, tmp_path):
    # The whole tour from the installed wheel alone: profiles, recipes, agents and server.
    result = subprocess.run(
        [str(with_aggregator / "plumb"), "demo", "--once"],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        cwd=tmp_path,
        env=clean_env(COLUMNS="200"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "drift detected in" in result.stdout and "drift cleared:" in result.stdout
