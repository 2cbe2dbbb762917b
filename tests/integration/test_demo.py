"""`plumb demo --once`: the whole tour against real processes, then everything stops.

What the tour must show comes from tour.py's story: a driver upgrade on eks-h100-1 opens
critical drift and its rollback closes it, the what-if's safe driver rolled out to two of the
four H100 nodes is one event of the fleet timeline, a Helm bundle verifies, gke-a100-2 (ECC errors,
slow NCCL) fails validation, and eks-h100-4, 20 % under its three H100 twins, is a straggler.
Staying up until Ctrl-C is covered by test_readme.py (`make demo`).
"""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest
from conftest import BIN, ENV
from timeouts import scaled

pytestmark = pytest.mark.integration


def test_the_demo_runs_through_and_stops_everything_with_once(tmp_path):
    result = subprocess.run(
        [str(BIN / "plumb"), "demo", "--once"],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        cwd=tmp_path,
        env={**ENV, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "drift detected in" in out
    assert "drift cleared:" in out
    # plumb whatif on the H100 pool: R570 blocked (exit 1), R595 safe (exit 0)
    assert re.search(r"^what-if driver 570\.195\.03: blocked$(?s:.*?)^exit code 1$", out, re.M)
    assert re.search(r"^what-if driver 595\.45\.04: safe$(?s:.*?)^exit code 0$", out, re.M)
    # plumb changes after the rollout: one event, eks-h100-2 and -3 of the pool's four nodes
    assert "1 change event, newest first" in out
    assert re.search(
        r"^\S+ +driver\.driver_version +580\.173\.02 → 595\.45\.04 +2 of 4 +eks/h100/", out, re.M
    )
    assert re.search(r"^OK: \d+ files match checksums.txt$", out, re.M)  # plumb verify
    assert re.search(r"^validated 6 nodes in \d+\.\d s \(plumb validate", out, re.M)
    assert "exit code 1: non-zero because gke-a100-2 failed" in out
    assert "eks-h100-4 measures 20% under its twins" in out
    assert re.search(r"^eks-h100-4 +warning +straggler +nccl-allreduce", out, re.M)
    assert re.search(r"^H100 SXM5 +8 GPUs +nvswitch +nccl-allreduce +4 +460 GB/s", out, re.M)
    assert "Running until Ctrl-C" not in out and "Try" not in out  # no links to a stopped server
    (base,) = re.findall(r"HTTP (http://127\.0\.0\.1:\d+)", out)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base}/readyz", timeout=5)
