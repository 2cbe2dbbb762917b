"""Deterministic archives of a bundle, and reading a bundle back from a folder or archive.

Same files, same bytes: entries sorted, one top-level folder, fixed mtime (1980-01-01, the
earliest a zip can hold), modes 0644/0755, uid/gid 0 and no user or group names; gzip
without a file name or timestamp.
"""

from __future__ import annotations

import gzip
import io
import stat
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Literal

from plumb.aggregator.bundle.errors import BundleError

__all__ = ["FORMATS", "Format", "archive", "read_bundle", "unpack", "write_dir"]

Format = Literal["tar.gz", "zip"]
FORMATS: tuple[Format, ...] = ("tar.gz", "zip")
MTIME = 315532800  # 1980-01-01T00:00:00Z
MAX_FILES = 10_000  # a bundle holds tens of files; bounds what `verify` reads from an archive


def _mode(path: str, executables: frozenset[str]) -> int:
    return 0o755 if path in executables else 0o644


def archive(
    top: str, files: Mapping[str, bytes], executables: frozenset[str], fmt: Format
) -> bytes:
    """``files`` under folder ``top`` as a tar.gz or zip, byte-identical for equal input."""
    buf = io.BytesIO()
    if fmt == "tar.gz":
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for path in sorted(files):
                    info = tarfile.TarInfo(f"{top}/{path}")
                    info.size, info.mtime = len(files[path]), MTIME
                    info.mode = _mode(path, executables)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    tar.addfile(info, io.BytesIO(files[path]))
    elif fmt == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for path in sorted(files):
                info = zipfile.ZipInfo(f"{top}/{path}", date_time=(1980, 1, 1, 0, 0, 0))
                info.create_system = 3  # unix, so the mode below is honoured
                info.external_attr = (stat.S_IFREG | _mode(path, executables)) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, files[path])
    else:
        raise BundleError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return buf.getvalue()


def write_dir(directory: Path, files: Mapping[str, bytes], executables: frozenset[str]) -> None:
    """Write ``files`` under ``directory`` (created; existing files are replaced)."""
    for path in sorted(files):
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files[path])
        target.chmod(_mode(path, executables))


def unpack(data: bytes, directory: Path) -> int:
    """Write a bundle ``tar.gz`` (as ``archive`` makes it) under ``directory``; its file count."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [m for m in tar.getmembers()[: MAX_FILES + 1] if m.isfile()]
            files = _strip_top(
                Path("archive"), {m.name: tar.extractfile(m).read() for m in members}
            )  # type: ignore[union-attr]
            executables = {
                rel for m, rel in zip(members, files, strict=True) if m.mode & stat.S_IXUSR
            }
    except tarfile.TarError as exc:
        raise BundleError(f"not a bundle archive: {exc}") from exc
    write_dir(directory, files, frozenset(executables))
    return len(files)


def read_bundle(path: Path) -> dict[str, bytes]:
    """A bundle's files (relative path → bytes) from a folder, ``.tar.gz`` or ``.zip``."""
    if path.is_dir():
        out = {}
        for p in sorted(path.rglob("*")):
            rel = p.relative_to(path).as_posix()
            if p.is_symlink() or not (p.is_file() or p.is_dir()):
                raise BundleError(f"{rel}: not a regular file; a bundle holds only files")
            if p.is_file():
                out[rel] = p.read_bytes()
        return out
    if not path.is_file():
        raise BundleError(f"no bundle at {path}")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            entries = [i for i in zf.infolist() if not i.is_dir()]
            return _strip_top(path, {i.filename: zf.read(i) for i in entries[: MAX_FILES + 1]})
    try:
        with tarfile.open(path, mode="r:*") as tar:
            members = tar.getmembers()[: MAX_FILES + 1]
            bad = [m.name for m in members if not (m.isfile() or m.isdir())]
            if bad:
                raise BundleError(f"{bad[0]}: not a regular file; a bundle holds only files")
            read = {m.name: tar.extractfile(m).read() for m in members if m.isfile()}  # type: ignore[union-attr]
            return _strip_top(path, read)
    except tarfile.TarError as exc:
        raise BundleError(f"{path}: neither a folder, a tar.gz nor a zip: {exc}") from exc


def _strip_top(path: Path, entries: dict[str, bytes]) -> dict[str, bytes]:
    """Entries relative to the archive's one top-level folder; unsafe names are refused."""
    if len(entries) > MAX_FILES:
        raise BundleError(f"{path}: more than {MAX_FILES} files; not a bundle")
    tops = {PurePosixPath(name).parts[0] for name in entries}
    if len(tops) != 1:
        raise BundleError(f"{path}: expected one top-level folder, found {sorted(tops)[:5]}")
    out = {}
    for name, data in entries.items():
        parts = PurePosixPath(name).parts[1:]
        if not parts or name.startswith("/") or ".." in parts:
            raise BundleError(f"{path}: unsafe entry name {name!r}")
        out["/".join(parts)] = data
    return out
