"""Shared libraries on the host: finding them under a host root and asking their version.

Paths are resolved inside the host root (an absolute symlink such as /usr/local/cuda ->
/etc/alternatives/cuda points into the host, not into the agent's container), and each library
is reported once, by its real path as the host sees it. A search is repeated only when one of
the directories it read has changed (`LibraryScans`), so a poll every second stays cheap.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from plumb.facts import Reading

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = [
    "LibraryProbeError",
    "LibraryScans",
    "find_libraries",
    "library_facts",
    "probe_version",
]

log = logging.getLogger(__name__)

_MAX_SYMLINK_HOPS = 40  # the kernel's own limit (MAXSYMLINKS)
# A directory changed this recently may change again within the same timestamp tick, unseen by
# its stamp; a search that read one is not reused (git's "racily clean" rule).
_RACY_S = 2.0

_Stamp = tuple[int, int, int] | None  # (inode, mtime, ctime) in ns; None: the path is gone


class LibraryProbeError(Exception):
    """A library could not be loaded or does not export the version function."""


def host_realpath(root: Path, path: PurePosixPath, seen: set[Path] | None = None) -> PurePosixPath:
    """`path` (absolute, as on the host) with every symlink resolved inside `root`; adds to
    `seen` each directory whose entries the answer depends on."""
    parts = list(path.parts[1:])
    resolved = PurePosixPath("/")
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            resolved = resolved.parent
            continue
        candidate = resolved / part
        on_disk = root / candidate.relative_to("/")
        if seen is not None:
            seen.add(on_disk.parent)
        if not on_disk.is_symlink():
            resolved = candidate
            continue
        hops += 1
        if hops > _MAX_SYMLINK_HOPS:
            raise OSError(f"too many levels of symbolic links: {path}")
        target = PurePosixPath(on_disk.readlink())
        parts = list(target.parts[1:] if target.is_absolute() else target.parts) + parts
        if target.is_absolute():
            resolved = PurePosixPath("/")
    return resolved


class LibraryScans:
    """`find_libraries` results by (root, patterns), reused while every directory a search read
    keeps its inode, mtime and ctime: installing, removing or relinking a library changes the
    directory that holds the entry, so a poll re-reads only a few stamps."""

    def __init__(self, racy_s: float = _RACY_S, max_entries: int = 64) -> None:
        self._racy_ns = int(racy_s * 1e9)
        self._max_entries = max_entries
        self._held: dict[
            tuple[Path, tuple[str, ...]],
            tuple[tuple[tuple[Path, _Stamp], ...], list[PurePosixPath]],
        ] = {}
        self.hits = self.misses = 0

    def find(self, root: Path, patterns: Iterable[str]) -> list[PurePosixPath]:
        """What `find_libraries` returns, searching again only when a directory changed."""
        key = (root, tuple(patterns))
        held = self._held.get(key)
        if held is not None and all(_stamp(d) == stamp for d, stamp in held[0]):
            self.hits += 1
            return list(held[1])
        self.misses += 1
        started_ns = time.time_ns()
        seen: set[Path] = set()
        found = _search(root, key[1], seen)
        stamps = tuple((d, _stamp(d)) for d in seen)
        if any(stamp is not None and stamp[2] >= started_ns - self._racy_ns for _, stamp in stamps):
            self._held.pop(key, None)
        else:
            if len(self._held) >= self._max_entries:
                self._held.clear()
            self._held[key] = (stamps, found)
        return list(found)


def _stamp(path: Path) -> _Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


_SCANS = LibraryScans()


def find_libraries(root: Path, patterns: Iterable[str]) -> list[PurePosixPath]:
    """Distinct regular files matching the glob `patterns` (relative to `root`), by host path.

    Each is returned once, by its real path, sorted; unreadable directories are skipped. The
    search is repeated only when a directory it read has changed since (see `LibraryScans`).
    """
    return _SCANS.find(root, patterns)


def _search(root: Path, patterns: Iterable[str], seen: set[Path]) -> list[PurePosixPath]:
    found: set[PurePosixPath] = set()
    for pattern in patterns:
        for match in _glob(root, pattern, seen):
            try:
                real = host_realpath(root, match, seen)
            except OSError as exc:
                log.debug("skipping library", extra={"path": str(match), "error": str(exc)})
                continue
            if (root / real.relative_to("/")).is_file():
                found.add(real)
    return sorted(found)


def _glob(root: Path, pattern: str, seen: set[Path]) -> list[PurePosixPath]:
    """Host paths matching `pattern`, each directory's symlinks resolved inside `root`.

    Path.glob would follow an absolute symlink out of the root, into the agent's own filesystem.
    """
    matches = [PurePosixPath("/")]
    for part in PurePosixPath(pattern).parts:
        step: list[PurePosixPath] = []
        for parent in matches:
            try:
                real = host_realpath(root, parent, seen)
                directory = root / real.relative_to("/")
                seen.add(directory)
                if not directory.is_dir():
                    continue
                if any(c in part for c in "*?["):
                    names = [e.name for e in os.scandir(directory) if fnmatchcase(e.name, part)]
                else:
                    names = [part] if os.path.lexists(directory / part) else []
            except OSError as exc:
                log.debug("skipping directory", extra={"path": str(parent), "error": str(exc)})
                continue
            step.extend(real / name for name in names)
        matches = step
    return matches


def probe_version(kind: str, path: Path) -> str:
    """The version the library at `path` reports: "cudart" -> "12.4", "nccl" -> "2.21.5".

    Loads the library with ctypes and calls cudaRuntimeGetVersion / ncclGetVersion; a file that
    is no loadable library or lacks the symbol raises LibraryProbeError instead of crashing.
    """
    symbol = {"cudart": "cudaRuntimeGetVersion", "nccl": "ncclGetVersion"}.get(kind)
    if symbol is None:
        raise ValueError(f"unknown library kind: {kind!r}")
    try:
        function = getattr(ctypes.CDLL(str(path)), symbol)
    except OSError as exc:
        raise LibraryProbeError(f"cannot load {path}: {exc}") from exc
    except AttributeError as exc:
        raise LibraryProbeError(f"{path} does not export {symbol}") from exc
    code = ctypes.c_int(0)
    status = function(ctypes.byref(code))
    if status != 0:
        raise LibraryProbeError(f"{symbol} in {path} returned error {status}")
    return decode_version(kind, code.value)


def decode_version(kind: str, code: int) -> str:
    """The dotted version for a library's integer version code."""
    if kind == "cudart":
        return f"{code // 1000}.{code % 1000 // 10}"  # 12040 -> 12.4
    if code >= 10000:  # NCCL >= 2.9: 22105 -> 2.21.5
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"  # older NCCL: 2708 -> 2.7.8


def library_facts(
    sources: Sources, kind: str, prefix: str, paths: list[PurePosixPath]
) -> dict[str, Reading]:
    """`{prefix}[i].path` and `{prefix}[i].version` for each library, the version probed via
    `sources.library_version`; a failed probe costs only that version."""
    out: dict[str, Reading] = {}
    for i, path in enumerate(paths):
        out[f"{prefix}[{i}].path"] = Reading.ok(str(path))
        try:
            version = Reading.ok(
                sources.library_version(kind, sources.host_root / path.relative_to("/"))
            )
        except Exception as exc:  # a broken copy must not hide the others
            version = Reading.failed(f"{type(exc).__name__}: {exc}")
        out[f"{prefix}[{i}].version"] = version
    return out
