"""The real helm every chart and bundle test runs: one way to find it.

$PLUMB_HELM (what `make test` exports), else one on PATH, else the static build that
scripts/install-helm.sh caches outside the repository. When none can be had the calling test
skips and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def helm_path() -> str:
    """The path of a working helm binary, or skip the test."""
    found = os.environ.get("PLUMB_HELM") or shutil.which("helm")
    if found:
        return found
    try:
        run = subprocess.run(
            [str(ROOT / "scripts" / "install-helm.sh")],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"helm cannot be installed here (scripts/install-helm.sh: {exc})")
    return run.stdout.strip().splitlines()[-1]
