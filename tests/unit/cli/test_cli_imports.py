"""A light `plumb` command imports nothing heavy it does not use.

Each case runs `plumb ARGS` in a fresh interpreter and lists `sys.modules` once it is done:
the server's stack (FastAPI, SQLAlchemy, gRPC, pydantic), the recipe catalog, bundle code and
the wire model's protobuf cost most of a second to import, and only `serve`, `bundle`,
`verify`, `node` and criteria checks need some of them. Timings are in bench/cli_startup.py;
this holds the import graph, which does not vary with the machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Run `plumb` as its console script does, then write the modules it loaded to argv[1].
_SCRIPT = """
import json, sys
out, sys.argv = sys.argv[1], ["plumb", *sys.argv[2:]]
from plumb.aggregator.__main__ import main
try:
    main()
except SystemExit:
    pass
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
"""

HEAVY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "grpc",
    "google.protobuf",
    "pydantic_settings",
    "prometheus_client",
    "plumb.facts",
    "plumb.aggregator.api",
    "plumb.aggregator.core",
    "plumb.aggregator.store",
    "plumb.aggregator.settings",
    "plumb.aggregator.recipes",
    "plumb.aggregator.bundle",
    "plumb.aggregator.drift.engine",
    "plumb.aggregator.aicr",
    "plumb.aggregator.validation",
)
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, the call fails at once


def loaded(tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUMB_")}
    subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(out), *args],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return set(json.loads(out.read_text()))


def heavy(modules: set[str]) -> list[str]:
    """The HEAVY packages (or their submodules) among `modules`."""
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("--version",),
        ("nodes", "--help"),
        ("nodes", "--server", UNREACHABLE),
        ("drift", "--severity", "critical", "--server", UNREACHABLE),
        ("watch", "--iterations", "1", "--server", UNREACHABLE),
    ],
)
def test_a_light_command_loads_no_server_recipe_or_bundle_code(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    modules = loaded(tmp_path, *args)
    assert "plumb.aggregator.cli" in modules  # the command really ran
    assert heavy(modules) == []


def test_help_and_version_load_neither_the_http_client_nor_pydantic(tmp_path: Path) -> None:
    # A command that runs does load pydantic: typer converts every parameter with a pydantic
    # TypeAdapter. --help and --version stop before that.
    for args in (("--help",), ("--version",)):
        modules = loaded(tmp_path, *args)
        assert "plumb.aggregator.cli" in modules
        assert not {m for m in modules if m.partition(".")[0] in ("httpx", "yaml", "pydantic")}
