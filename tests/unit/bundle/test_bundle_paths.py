"""A bundle archive whose entry names leave its folder is refused before anything is written."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

import pytest

from plumb.aggregator.bundle import BundleError, unpack, verify

UNSAFE = ["top/../../evil.sh", "/etc/cron.d/evil", "top/a/../../../evil.sh"]


def tar_gz(names: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"boom"))
    return buf.getvalue()


def zip_bytes(names: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in names:
            zf.writestr(name, b"boom")
    return buf.getvalue()


@pytest.mark.parametrize("name", UNSAFE)
@pytest.mark.parametrize("pack", [tar_gz, zip_bytes], ids=["tar.gz", "zip"])
def test_reading_an_archive_with_an_unsafe_entry_is_refused_naming_it(tmp_path, name, pack):
    archive = tmp_path / "bundle.archive"
    archive.write_bytes(pack(["top/README.md", name]))
    with pytest.raises(BundleError, match="unsafe entry name|one top-level folder") as err:
        verify(archive)
    assert name in str(err.value) or "top-level" in str(err.value)


@pytest.mark.parametrize("name", UNSAFE)
def test_unpacking_an_unsafe_archive_writes_nothing(tmp_path, name):
    out = tmp_path / "deep" / "out"
    with pytest.raises(BundleError):
        unpack(tar_gz(["top/README.md", name]), out)
    assert not any(tmp_path.rglob("evil*"))
    assert not out.exists()


def test_a_link_in_a_bundle_archive_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        link = tarfile.TarInfo("top/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(buf.getvalue())
    with pytest.raises(BundleError, match="not a regular file"):
        verify(archive)


def test_an_archive_member_declaring_more_than_a_bundle_holds_is_refused_unread(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("top/values.yaml")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"boom"))
    data = bytearray(gzip.decompress(buf.getvalue()))
    # Rewrite the header's size field (octal, bytes 124-135) to claim 64 GiB.
    data[124:136] = b"%011o\0" % (64 << 30)
    data[148:156] = b" " * 8
    data[148:156] = b"%06o\0 " % sum(data[:512])
    archive = tmp_path / "claims.tar.gz"
    archive.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(BundleError, match="bytes of files; not a bundle"):
        verify(archive)
