"""Shared libraries on the host: finding them under a host root and asking their version.

Paths are resolved inside the host root (an absolute symlink such as /usr/local/cuda ->
/etc/alternatives/cuda points into the host, not into the agent's container), and each library
is reported once, by its real path as the host sees it.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from plumb.facts import Reading

if TYPE_CHECKING:
    from agent.collect import Sources

__all__ = ["LibraryProbeError", "find_libraries", "library_facts", "probe_version"]

log = logging.getLogger(__name__)

_MAX_SYMLINK_HOPS = 40  # the kernel's own limit (MAXSYMLINKS)


class LibraryProbeError(Exception):
    """A library could not be loaded or does not export the version function."""


def host_realpath(root: Path, path: PurePosixPath) -> PurePosixPath:
    """`path` (absolute, as on the host) with every symlink resolved inside `root`."""
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


def find_libraries(root: Path, patterns: Iterable[str]) -> list[PurePosixPath]:
    """Distinct regular files matching the glob `patterns` (relative to `root`), by host path.

    Each is returned once, by its real path, sorted; unreadable directories are skipped.
    """
    found: set[PurePosixPath] = set()
    for pattern in patterns:
        for match in _glob(root, pattern):
            try:
                real = host_realpath(root, match)
            except OSError as exc:
                log.debug("skipping library", extra={"path": str(match), "error": str(exc)})
                continue
            if (root / real.relative_to("/")).is_file():
                found.add(real)
    return sorted(found)


def _glob(root: Path, pattern: str) -> list[PurePosixPath]:
    """Host paths matching `pattern`, each directory's symlinks resolved inside `root`.

    Path.glob would follow an absolute symlink out of the root, into the agent's own filesystem.
    """
    matches = [PurePosixPath("/")]
    for part in PurePosixPath(pattern).parts:
        step: list[PurePosixPath] = []
        for parent in matches:
            try:
                real = host_realpath(root, parent)
                directory = root / real.relative_to("/")
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
