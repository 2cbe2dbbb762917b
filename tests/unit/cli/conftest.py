"""The CLI tests' canned aggregator: API answers captured from a real one (data/api.json, three
simulated nodes, one drifted, timestamps pinned), served in place of `api_json`."""

from __future__ import annotations

import copy
import importlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

import plumb.aggregator.cli.render as render
from plumb.aggregator.cli import app
from plumb.aggregator.cli.app import connection

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 7, 1, 3, 0, 0, tzinfo=UTC)
API = json.loads((DATA / "api.json").read_text())


class FakeApi:
    """Answers api_json from the captured responses and records what was asked, of which
    server, with which headers."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.bodies: list[dict | None] = []
        self.servers: list[str] = []
        self.headers: list[dict] = []
        self.answers: dict[str, object] = {}

    def __call__(
        self,
        server: str,
        path: str,
        *,
        params: dict | None = None,
        method: str = "GET",
        body: dict | None = None,
        **_,
    ):
        self.calls.append((path, dict(params or {})))
        self.bodies.append(body)
        self.servers.append(server)
        self.headers.append(connection()["headers"])
        if path in self.answers:
            return copy.deepcopy(self.answers[path])
        if path == "/v1/recipe":
            return {"criteria": params}
        return copy.deepcopy(API[path])


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()
    for name in (
        "nodes",
        "node",
        "drift",
        "recipe",
        "baseline",
        "baselines",
        "validate",
        "changes",
        "whatif",
    ):
        monkeypatch.setattr(
            importlib.import_module(f"plumb.aggregator.cli.{name}"), "api_json", fake
        )
    monkeypatch.setattr(render, "_now", lambda: NOW)
    monkeypatch.setenv("COLUMNS", "160")
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PLUMB_SERVER"):
        monkeypatch.delenv(var, raising=False)
    return fake


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.stdout
