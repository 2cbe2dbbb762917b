"""Shared fixtures for the agent's unit tests: simulated nodes and editable profile copies."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.profile import profile_path
from plumb.facts import Reading


@pytest.fixture
def simulate(tmp_path: Path) -> Callable[..., Simulation]:
    """Build a Simulation in its own work directory under tmp_path."""

    def make(profile: str = "dgx-h100", node_name: str = "gpu-node-1") -> Simulation:
        workdir = tmp_path / f"sim-{node_name}"
        workdir.mkdir(exist_ok=True)
        return Simulation(profile, node_name, workdir)

    return make


@pytest.fixture
def profile_copy(tmp_path: Path) -> Callable[..., Path]:
    """Copy a shipped profile to tmp_path, optionally changed by `edit(data)`; returns its path."""

    def make(name: str = "dgx-h100", edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
        data = yaml.safe_load(profile_path(name).read_text())
        if edit:
            edit(data)
        path = tmp_path / f"{name}.yaml"
        _write_yaml(path, data)
        return path

    return make


@pytest.fixture
def write_yaml() -> Callable[[Path, Any], None]:
    """Replace a file with YAML atomically, as an editor or a ConfigMap update does."""
    return _write_yaml


@pytest.fixture
def gpu_fields() -> Callable[[dict[str, Reading], int], dict[str, Reading]]:
    """The gpus[index].* facts of a flat facts dict, by field name."""

    def fields(facts: dict[str, Reading], index: int) -> dict[str, Reading]:
        prefix = f"gpus[{index}]."
        return {p.removeprefix(prefix): r for p, r in facts.items() if p.startswith(prefix)}

    return fields


def _write_yaml(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    tmp.replace(path)
