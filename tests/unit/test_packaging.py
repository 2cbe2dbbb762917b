"""The wheel lists its packages by hand (the folders are mapped into `plumb`): every package
folder of the tree must be in that list, or the installed wheel lacks it."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"agent": "plumb.agent", "aggregator": "plumb.aggregator", "proto/plumb": "plumb"}


def test_every_package_folder_is_in_the_wheel() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = set()
    for folder, name in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
