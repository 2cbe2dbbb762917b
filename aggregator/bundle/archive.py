"""Deterministic archives of a bundle, and reading a bundle back from a folder or archive.

Same files, same bytes: entries sorted, one top-level folder, fixed mtime (1980-01-01, the
earliest a zip can hold), modes 0644/0755, uid/gid 0 and no user or group names; gzip
without a file name or timestamp.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from plumb.aggregator.bundle.checksums import CHECKSUMS, SIGNATURE
from plumb.aggregator.bundle.errors import BundleError

__all__ = [
    "FORMATS",
    "Archive",
    "Contents",
    "Format",
    "archive",
    "read_archive",
    "read_bundle",
    "unpack",
    "write_dir",
]

Format = Literal["tar.gz", "zip"]
FORMATS: tuple[Format, ...] = ("tar.gz", "zip")
MTIME = 315532800  # 1980-01-01T00:00:00Z
MAX_FILES = 10_000  # a bundle holds tens of files; bounds what `verify` reads from an archive
# A bundle is tens of files of a few KiB (charts included, well under 1 MiB); bounds the
# bytes `verify` hashes, whatever an archive expands to.
MAX_BYTES = 64 << 20
_CHUNK = 1 << 16


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


@dataclass(frozen=True)
class Archive:
    """A bundle read back from the ``tar.gz`` that ``archive`` makes."""

    top: str
    files: dict[str, bytes]
    executables: frozenset[str]

    def to(self, fmt: Format) -> bytes:
        """The same files, archived again as ``fmt``."""
        return archive(self.top, self.files, self.executables, fmt)


def read_archive(data: bytes) -> Archive:
    """A bundle ``tar.gz`` (as ``archive`` makes it): its folder, files and executables."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [m for m in tar.getmembers()[: MAX_FILES + 1] if m.isfile()]
            entries = {m.name: tar.extractfile(m).read() for m in members}  # type: ignore[union-attr]
    except tarfile.TarError as exc:
        raise BundleError(f"not a bundle archive: {exc}") from exc
    files = _strip_top(Path("archive"), entries)
    executables = {
        "/".join(PurePosixPath(m.name).parts[1:]) for m in members if m.mode & stat.S_IXUSR
    }
    top = PurePosixPath(members[0].name).parts[0] if members else ""
    return Archive(top, files, frozenset(executables))


def unpack(data: bytes, directory: Path) -> int:
    """Write a bundle ``tar.gz`` (as ``archive`` makes it) under ``directory``; its file count."""
    bundle = read_archive(data)
    write_dir(directory, bundle.files, bundle.executables)
    return len(bundle.files)


@dataclass(frozen=True)
class Contents:
    """What ``verify`` needs of a bundle: each file's SHA-256, and the bytes of
    ``checksums.txt`` and ``checksums.txt.sig`` (None where absent)."""

    digests: dict[str, str]
    checksums: bytes | None
    signature: bytes | None


def read_bundle(path: Path) -> Contents:
    """A bundle's file digests, ``checksums.txt`` and signature, from a folder, ``.tar.gz`` or
    ``.zip``.

    Files are hashed as they stream, in chunks, so memory stays bounded whatever an archive
    claims or expands to; more than MAX_BYTES of content (a decompression bomb: a few MB of
    gzip can hold gigabytes of zeros) or MAX_FILES files is refused as not a bundle.
    """
    digests = _Digests(path)
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            rel = p.relative_to(path).as_posix()
            if p.is_symlink() or not (p.is_file() or p.is_dir()):
                raise BundleError(f"{rel}: not a regular file; a bundle holds only files")
            if p.is_file():
                with p.open("rb") as f:
                    digests.add(rel, f, p.stat().st_size)
        return digests.contents()
    if not path.is_file():
        raise BundleError(f"no bundle at {path}")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for i in zf.infolist():
                if not i.is_dir():
                    with zf.open(i) as f:
                        digests.add(digests.relative(i.filename), f, i.file_size)
        return digests.contents()
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for m in tar:  # one header at a time, never the whole member list
                if not (m.isfile() or m.isdir()):
                    raise BundleError(f"{m.name}: not a regular file; a bundle holds only files")
                if m.isfile():
                    digests.add(digests.relative(m.name), tar.extractfile(m), m.size)  # type: ignore[arg-type]
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BundleError(f"{path}: neither a folder, a tar.gz nor a zip: {exc}") from exc
    return digests.contents()


class _Digests:
    """Hashes a bundle's files as they stream in, within MAX_FILES and MAX_BYTES."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, str] = {}
        self.kept: dict[str, bytes] = {}
        self._left = MAX_BYTES
        self._top: str | None = None

    def relative(self, name: str) -> str:
        """An archive entry's path under its one top-level folder; unsafe names refused."""
        parts = PurePosixPath(name).parts
        if self._top is None and parts:
            self._top = parts[0]
        if not parts or parts[0] != self._top:
            raise BundleError(f"{self.path}: expected one top-level folder, found {name!r}")
        if len(parts) < 2 or name.startswith("/") or ".." in parts:
            raise BundleError(f"{self.path}: unsafe entry name {name!r}")
        return "/".join(parts[1:])

    def add(self, rel: str, stream: IO[bytes], declared: int) -> None:
        if len(self.files) >= MAX_FILES:
            raise BundleError(f"{self.path}: more than {MAX_FILES} files; not a bundle")
        if declared > self._left:
            raise self._too_big()
        digest = hashlib.sha256()
        keep = rel in (CHECKSUMS, SIGNATURE)
        kept = bytearray()
        while chunk := stream.read(_CHUNK):
            self._left -= len(chunk)
            if self._left < 0:
                raise self._too_big()
            digest.update(chunk)
            if keep:
                kept += chunk
        self.files[rel] = digest.hexdigest()
        if keep:
            self.kept[rel] = bytes(kept)

    def contents(self) -> Contents:
        return Contents(self.files, self.kept.get(CHECKSUMS), self.kept.get(SIGNATURE))

    def _too_big(self) -> BundleError:
        return BundleError(f"{self.path}: more than {MAX_BYTES} bytes of files; not a bundle")


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
