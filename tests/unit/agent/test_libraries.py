"""CUDA and NCCL discovery under a host root, and the real ctypes version probe."""

from __future__ import annotations

import ctypes.util
import glob
import os
import time
from pathlib import Path

import pytest

from plumb.agent.collect import Sources, cuda, libraries, nccl
from plumb.agent.collect.libraries import (
    LibraryProbeError,
    LibraryScans,
    decode_version,
    find_libraries,
    probe_version,
)
from plumb.facts import Reading


def _touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")


def _sources(root: Path, library_dirs=(), versions=None) -> Sources:
    seen = []

    def version(kind: str, path: Path) -> str:
        seen.append((kind, path))
        relative = "/" + str(path.relative_to(root))
        if versions is None or relative not in versions:
            raise LookupError(f"no version for {relative}")
        return versions[relative]

    return Sources(nvml=None, host_root=root, library_version=version, library_dirs=library_dirs)


def test_cuda_runtimes_are_found_once_each_by_real_path(tmp_path):
    _touch(
        tmp_path,
        "usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127",
        "usr/local/cuda-11.8/lib64/libcudart.so.11.8.89",
        "opt/app/lib/libcudart.so.12",
    )
    (tmp_path / "usr/local/cuda-12.4/lib64").symlink_to("targets/x86_64-linux/lib")
    lib64 = tmp_path / "usr/local/cuda-12.4/lib64"
    (lib64 / "libcudart.so.12").symlink_to("libcudart.so.12.4.127")
    (lib64 / "libcudart.so").symlink_to("libcudart.so.12")
    # An absolute link points into the host, not into the agent's filesystem.
    (tmp_path / "usr/local/cuda").symlink_to("/usr/local/cuda-12.4")
    versions = {
        "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127": "12.4",
        "/usr/local/cuda-11.8/lib64/libcudart.so.11.8.89": "11.8",
    }

    facts = cuda.collect(_sources(tmp_path, (Path("/opt/app/lib"),), versions))

    assert facts["cuda.runtimes[0].path"] == Reading.ok("/opt/app/lib/libcudart.so.12")
    assert (
        facts["cuda.runtimes[0].version"].error
        == "LookupError: no version for /opt/app/lib/libcudart.so.12"
    )
    assert facts["cuda.runtimes[1].path"] == Reading.ok(
        "/usr/local/cuda-11.8/lib64/libcudart.so.11.8.89"
    )
    assert facts["cuda.runtimes[1].version"] == Reading.ok("11.8")
    assert facts["cuda.runtimes[2].path"] == Reading.ok(
        "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127"
    )
    assert facts["cuda.runtimes[2].version"] == Reading.ok("12.4")
    assert "cuda.runtimes[3].path" not in facts


def test_absolute_symlinks_resolve_inside_the_root(tmp_path):
    _touch(tmp_path, "usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5")
    (tmp_path / "usr/lib/x86_64-linux-gnu/libnccl.so.2").symlink_to(
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"
    )
    found = find_libraries(tmp_path, ["usr/lib/x86_64-linux-gnu/libnccl.so.2"])
    assert [str(p) for p in found] == ["/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"]


def test_a_symlink_loop_is_skipped(tmp_path):
    (tmp_path / "usr/lib64").mkdir(parents=True)
    (tmp_path / "usr/lib64/libnccl.so.2").symlink_to("libnccl.so.2")
    assert find_libraries(tmp_path, ["usr/lib64/libnccl.so.2"]) == []


def test_nccl_is_found_in_system_dirs_and_pip_wheels(tmp_path):
    _touch(
        tmp_path,
        "usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        "usr/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        "usr/lib/x86_64-linux-gnu/libnccl-net.so",  # a plugin, not NCCL itself
    )
    versions = {
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2": "2.21.5",
        "/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2": "2.20.5",
        "/usr/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2": "2.23.4",
    }
    facts = nccl.collect(_sources(tmp_path, versions=versions))
    got = {
        facts[f"nccl.libraries[{i}].path"].value: facts[f"nccl.libraries[{i}].version"].value
        for i in range(3)
    }
    assert got == versions
    assert list(got) == sorted(got)
    assert "nccl.libraries[3].path" not in facts


def test_toolkit_version_from_version_json_or_txt(tmp_path):
    cuda_dir = tmp_path / "usr/local/cuda"
    cuda_dir.mkdir(parents=True)
    sources = _sources(tmp_path)
    assert cuda.collect(sources)["cuda.cuda_toolkit_version"] == Reading.not_supported()

    (cuda_dir / "version.txt").write_text("CUDA Version 10.2.89\n")
    assert cuda.collect(sources)["cuda.cuda_toolkit_version"] == Reading.ok("10.2.89")

    (cuda_dir / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}')
    assert cuda.collect(sources)["cuda.cuda_toolkit_version"] == Reading.ok("12.4.1")

    (cuda_dir / "version.json").write_text('{"cuda": {}}')
    reading = cuda.collect(sources)["cuda.cuda_toolkit_version"]
    assert reading.status == "error" and "KeyError" in reading.error


def _settle() -> None:
    """Let the clock pass a file-timestamp tick, so the next change gets a new ctime."""
    time.sleep(0.05)


def _relink(link: Path, target: str) -> None:
    """Point `link` at `target` atomically, as `ln -sfn` and package managers do."""
    tmp = link.with_name(link.name + ".new")
    tmp.symlink_to(target)
    os.replace(tmp, link)


def test_a_changed_library_is_seen_through_the_reused_search(tmp_path, monkeypatch):
    scans = LibraryScans(racy_s=0)  # trust even fresh directories, so the search is reused
    monkeypatch.setattr(libraries, "_SCANS", scans)
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2.21.5").write_text("2.21.5")
    (lib / "libnccl.so.2").symlink_to("libnccl.so.2.21.5")

    def version(kind: str, path: Path) -> str:
        return path.read_text()  # the "library" holds its version

    sources = Sources(nvml=None, host_root=tmp_path, library_version=version)

    def libraries_found() -> dict[str, str]:
        facts = nccl.collect(sources)
        return {
            facts[f"nccl.libraries[{i}].path"].value: facts[f"nccl.libraries[{i}].version"].value
            for i in range(len(facts) // 2)
        }

    assert libraries_found() == {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "2.21.5"}
    assert libraries_found() == {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "2.21.5"}
    assert scans.hits == 1

    _settle()  # an upgrade: the new file, the link moved to it, the old file gone
    (lib / "libnccl.so.2.23.4").write_text("2.23.4")
    _relink(lib / "libnccl.so.2", "libnccl.so.2.23.4")
    (lib / "libnccl.so.2.21.5").unlink()
    assert libraries_found() == {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4": "2.23.4"}

    _settle()  # a pip wheel installed into directories that did not exist
    wheel = tmp_path / "usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2"
    wheel.parent.mkdir(parents=True)
    wheel.write_text("2.24.3")
    assert libraries_found() == {
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4": "2.23.4",
        "/usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2": "2.24.3",
    }

    _settle()  # rewritten in place: the search is reused, the version is asked again
    hits = scans.hits
    wheel.write_text("2.25.1")
    assert libraries_found()["/" + wheel.relative_to(tmp_path).as_posix()] == "2.25.1"
    assert scans.hits == hits + 1


def test_a_relinked_alternative_outside_the_searched_dirs_is_seen(tmp_path):
    # libnccl.so.2 -> /etc/alternatives/libnccl.so.2 -> /opt/nccl-X/lib/libnccl.so.2: an
    # upgrade moves only the link in /etc/alternatives, a directory no pattern names.
    _touch(tmp_path, "opt/nccl-2.21/lib/libnccl.so.2", "opt/nccl-2.23/lib/libnccl.so.2")
    (tmp_path / "etc/alternatives").mkdir(parents=True)
    alternative = tmp_path / "etc/alternatives/libnccl.so.2"
    alternative.symlink_to("/opt/nccl-2.21/lib/libnccl.so.2")
    (tmp_path / "usr/lib64").mkdir(parents=True)
    (tmp_path / "usr/lib64/libnccl.so.2").symlink_to("/etc/alternatives/libnccl.so.2")
    scans = LibraryScans(racy_s=0)
    pattern = ["usr/lib64/libnccl.so.2"]
    assert [str(p) for p in scans.find(tmp_path, pattern)] == ["/opt/nccl-2.21/lib/libnccl.so.2"]
    assert [str(p) for p in scans.find(tmp_path, pattern)] == ["/opt/nccl-2.21/lib/libnccl.so.2"]
    assert scans.hits == 1

    _settle()
    _relink(alternative, "/opt/nccl-2.23/lib/libnccl.so.2")
    assert [str(p) for p in scans.find(tmp_path, pattern)] == ["/opt/nccl-2.23/lib/libnccl.so.2"]


def test_a_search_that_read_a_just_changed_directory_is_not_reused(tmp_path):
    # A change within the same timestamp tick would leave the stamps as they were.
    _touch(tmp_path, "usr/lib64/libnccl.so.2")
    scans = LibraryScans()
    for _ in range(2):
        assert [str(p) for p in scans.find(tmp_path, ["usr/lib64/libnccl.so.2"])] == [
            "/usr/lib64/libnccl.so.2"
        ]
    assert (scans.hits, scans.misses) == (0, 2)


@pytest.mark.parametrize(
    ("kind", "code", "version"),
    [
        ("cudart", 12040, "12.4"),
        ("cudart", 11080, "11.8"),
        ("nccl", 22105, "2.21.5"),
        ("nccl", 2708, "2.7.8"),
    ],
)
def test_version_codes_decode(kind, code, version):
    assert decode_version(kind, code) == version


def test_probing_a_file_that_is_no_library_is_a_clear_error(tmp_path):
    fake = tmp_path / "libnccl.so.2"
    fake.write_text("not an ELF file")
    with pytest.raises(LibraryProbeError, match=f"cannot load {fake}"):
        probe_version("nccl", fake)


def test_probing_a_library_without_the_symbol_is_a_clear_error():
    libc = ctypes.util.find_library("c")
    with pytest.raises(LibraryProbeError, match="does not export ncclGetVersion"):
        probe_version("nccl", Path(libc))


def test_probing_an_unknown_kind_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown library kind"):
        probe_version("cublas", tmp_path)


_REAL_CUDART = sorted(glob.glob("/usr/local/cuda*/lib*/libcudart.so.*[0-9]"))


@pytest.mark.skipif(not _REAL_CUDART, reason="no CUDA runtime installed on this machine")
def test_probing_a_real_cuda_runtime_gives_its_version():
    major = Path(_REAL_CUDART[0]).name.split(".")[2]
    assert probe_version("cudart", Path(_REAL_CUDART[0])).startswith(f"{major}.")
