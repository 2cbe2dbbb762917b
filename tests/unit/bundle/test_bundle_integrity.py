"""Determinism and verification: same input, same bytes; any change is caught, by file."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from typer.testing import CliRunner

from plumb.aggregator.bundle import FORMATS, verify
from plumb.aggregator.cli import app


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("deployer", ["helm", "helmfile", "argocd", "argocd-helm", "flux"])
def test_same_input_gives_identical_archive_bytes(make_bundle, recipe, deployer, fmt):
    first = make_bundle(recipe, deployer).archive(fmt)
    second = make_bundle(recipe, deployer).archive(fmt)
    assert first == second


def test_an_override_changes_the_checksums(make_bundle):
    plain = make_bundle("gke-a100-cos-training", "helm")
    changed = make_bundle("gke-a100-cos-training", "helm", set=["gpu-operator:mig.strategy=single"])
    assert plain.files["checksums.txt"] != changed.files["checksums.txt"]
    assert plain.digest != changed.digest
    assert b"strategy: single" in changed.files["006-gpu-operator/values.yaml"]


def test_archive_entries_are_sorted_with_fixed_metadata(make_bundle):
    bundle = make_bundle("gke-a100-cos-training", "helm")
    with tarfile.open(fileobj=io.BytesIO(bundle.archive("tar.gz"))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {
        (315532800, 0, 0, "", "")
    }
    modes = {m.name.split("/", 1)[1]: m.mode for m in members}
    assert modes["deploy.sh"] == 0o755 and modes["README.md"] == 0o644
    with zipfile.ZipFile(io.BytesIO(bundle.archive("zip"))) as zf:
        infos = zf.infolist()
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert all(i.filename.startswith(bundle.name + "/") for i in infos)


@pytest.mark.parametrize("fmt", ["dir", *FORMATS])
def test_verify_accepts_an_untouched_bundle(make_bundle, tmp_path, fmt):
    bundle = make_bundle("eks-h100-training", "helmfile")
    path = _write(bundle, tmp_path, fmt)
    verdict = verify(path)
    assert verdict.problems == [] and verdict.checked == len(bundle.files)
    assert verdict.trust == "unverified" and not verdict.signed


def _write(bundle, tmp_path, fmt, change=None):
    files = dict(bundle.files)
    if change:
        change(files)
    tampered = type(bundle)(bundle.deployer, files, bundle.executables)
    if fmt == "dir":
        tampered.write(tmp_path / "b")
        return tmp_path / "b"
    path = tmp_path / f"b.{fmt}"
    path.write_bytes(tampered.archive(fmt))
    return path


def _flip(files):
    data = bytearray(files["001-aws-ebs-csi/values.yaml"])
    data[-2] ^= 0x01
    files["001-aws-ebs-csi/values.yaml"] = bytes(data)


@pytest.mark.parametrize("fmt", ["dir", *FORMATS])
def test_one_changed_byte_fails_verify_naming_the_file(make_bundle, tmp_path, fmt):
    path = _write(make_bundle("eks-h100-training", "helm"), tmp_path, fmt, _flip)
    problems = verify(path).problems
    assert [(p.path, p.kind) for p in problems] == [("001-aws-ebs-csi/values.yaml", "mismatch")]
    result = CliRunner().invoke(app, ["verify", str(path)])
    assert result.exit_code == 1
    assert "001-aws-ebs-csi/values.yaml: mismatch" in result.output


def test_missing_and_extra_files_fail_verify(make_bundle, tmp_path):
    def change(files):
        del files["deploy.sh"]
        files["notes.txt"] = b"added by hand\n"

    problems = verify(
        _write(make_bundle("eks-h100-training", "helm"), tmp_path, "dir", change)
    ).problems
    assert {(p.path, p.kind) for p in problems} == {
        ("deploy.sh", "missing"),
        ("notes.txt", "extra"),
    }


def test_verify_of_a_good_bundle_via_the_cli_exits_0(make_bundle, tmp_path):
    make_bundle("gke-l4-cos-inference", "flux").write(tmp_path)
    result = CliRunner().invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 0 and "OK" in result.output


def test_verify_without_checksums_fails(make_bundle, tmp_path):
    path = _write(
        make_bundle("eks-h100-training", "helm"), tmp_path, "dir", lambda f: f.pop("checksums.txt")
    )
    problems = verify(path).problems
    assert [(p.path, p.kind) for p in problems] == [("checksums.txt", "missing")]
