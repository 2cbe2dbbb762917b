"""`plumb verify` on decompression bombs: refused, in bounded memory, as a real process."""

from __future__ import annotations

import gzip
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import BIN, ENV

pytestmark = pytest.mark.integration

ZEROS_BYTES = 512 << 20  # half a GiB of zeros: 2.3 MB as gzip or deflate level 1
# What the CLI itself needs (Python, typer, rich, the aggregator's imports) is ~60 MiB;
# reading the member whole needed more than ZEROS_BYTES.
MAX_RSS_BYTES = 200 << 20


class _Zeros:
    """A file of `size` zero bytes that never exists in memory at once."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def _tar_gz(path: Path) -> Path:
    with gzip.open(path, "wb", compresslevel=1) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("bundle/values.yaml")
        info.size = ZEROS_BYTES
        tar.addfile(info, _Zeros(ZEROS_BYTES))  # type: ignore[arg-type]
    return path


def _zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("bundle/values.yaml", "w", force_zip64=True) as out:
            zeros = _Zeros(ZEROS_BYTES)
            while chunk := zeros.read(1 << 20):
                out.write(chunk)
    return path


# Runs the command from a small Python process and reports its exit status and peak RSS.
# A child forked straight from pytest would count pytest's own pages (hundreds of MiB late
# in the suite) in its peak until it execs; forked from this launcher it starts small.
_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
sys.stderr.buffer.write(err)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def _verify(path: Path) -> tuple[int, int, str]:
    """(exit status, peak RSS in bytes, stderr) of `plumb verify path`."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(BIN / "plumb"), "verify", str(path)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    code, maxrss_kib = (int(x) for x in done.stdout.split())
    return code, maxrss_kib * 1024, done.stderr  # ru_maxrss is in KiB on Linux


@pytest.mark.parametrize("make", [_tar_gz, _zip], ids=["tar.gz", "zip"])
def test_verify_refuses_a_member_of_zeros_in_bounded_memory(tmp_path, make):
    archive = make(tmp_path / f"bomb.{make.__name__[1:].replace('_', '.')}")
    assert archive.stat().st_size < 4 << 20
    code, rss, err = _verify(archive)
    assert code == 2, err  # invalid input
    assert "not a bundle" in err
    assert rss < MAX_RSS_BYTES, f"peak RSS {rss >> 20} MiB"
