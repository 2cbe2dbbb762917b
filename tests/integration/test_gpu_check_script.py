"""scripts/gpu-check.sh where there is no GPU: it stops at once, saying why (exit 2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "gpu-check.sh"


def run(path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": path},
    )


def test_without_nvidia_smi_the_script_says_so(tmp_path: Path) -> None:
    done = run(str(tmp_path))  # an empty PATH: no nvidia-smi anywhere
    assert done.returncode == 2
    assert "nvidia-smi not found" in done.stderr and "hint:" in done.stderr


def test_a_failing_nvidia_smi_is_reported_with_its_message(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the"
        ' NVIDIA driver" >&2\nexit 9\n'
    )
    fake.chmod(0o755)
    done = run(f"{tmp_path}:/usr/bin:/bin")
    assert done.returncode == 2
    assert "nvidia-smi -q -x failed: NVIDIA-SMI has failed" in done.stderr
