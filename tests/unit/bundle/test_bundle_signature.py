"""Signed bundles: keys made by OpenSSL, the tamper-and-recompute attack, trust levels."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plumb.aggregator.bundle import (
    BundleError,
    private_key,
    public_key,
    sign_archive,
    unpack,
    verify,
)
from plumb.aggregator.cli import app


def openssl(*args: str) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (Debian: apt-get install -y openssl)")
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Path]:
    """Two Ed25519 key pairs and an RSA key, made as a user would: with OpenSSL."""
    folder = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("signer", "other"):
        out[name] = folder / f"{name}.key"
        out[f"{name}.pub"] = folder / f"{name}.pub"
        openssl("genpkey", "-algorithm", "ed25519", "-out", str(out[name]))
        openssl("pkey", "-in", str(out[name]), "-pubout", "-out", str(out[f"{name}.pub"]))
    out["rsa"] = folder / "rsa.key"
    openssl(
        "genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(out["rsa"])
    )
    return out


def signed(make_bundle, keys, fmt: str = "tar.gz") -> bytes:
    bundle = make_bundle("eks-h100-training", "helm")
    return sign_archive(bundle.archive("tar.gz"), private_key(keys["signer"].read_bytes()), fmt)


def signed_dir(make_bundle, keys, tmp_path) -> Path:
    unpack(signed(make_bundle, keys), tmp_path / "b")
    return tmp_path / "b"


def pub(keys, name: str = "signer.pub"):
    return public_key(keys[name].read_bytes())


def recompute_checksums(folder: Path) -> None:
    """What an attacker does after editing a file: sha256sum every file again."""
    lines = [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(folder).as_posix()}\n"
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in ("checksums.txt", "checksums.txt.sig")
    ]
    (folder / "checksums.txt").write_text("".join(lines))


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_a_signed_bundle_verifies_with_the_signers_key(make_bundle, keys, tmp_path, fmt):
    path = tmp_path / f"b.{fmt}"
    path.write_bytes(signed(make_bundle, keys, fmt))
    verdict = verify(path, pub(keys))
    assert verdict.problems == [] and verdict.trust == "verified" and verdict.signed
    unsigned_count = len(make_bundle("eks-h100-training", "helm").files)
    assert verdict.checked == unsigned_count + 1  # checksums.txt.sig


def test_signing_twice_gives_the_same_bytes(make_bundle, keys):
    assert signed(make_bundle, keys) == signed(make_bundle, keys)  # Ed25519 is deterministic


def test_openssl_checks_the_signature_too(make_bundle, keys, tmp_path):
    folder = signed_dir(make_bundle, keys, tmp_path)
    raw = tmp_path / "sig.bin"
    raw.write_bytes(base64.b64decode((folder / "checksums.txt.sig").read_bytes()))
    openssl("pkeyutl", "-verify", "-pubin", "-inkey", str(keys["signer.pub"]), "-rawin",
            "-in", str(folder / "checksums.txt"), "-sigfile", str(raw))  # fmt: skip


def test_tamper_and_recompute_passes_checksums_alone_but_fails_with_the_key(
    make_bundle, keys, tmp_path
):
    folder = signed_dir(make_bundle, keys, tmp_path)
    values = next(folder.glob("*-aws-ebs-csi/values.yaml"))
    values.write_text(values.read_text() + "evil: true\n")
    recompute_checksums(folder)
    assert verify(folder).problems == []  # the weakness of checksums alone
    verdict = verify(folder, pub(keys))
    assert verdict.trust == "unknown"
    assert [(p.path, p.kind) for p in verdict.problems] == [("checksums.txt.sig", "mismatch")]
    result = CliRunner().invoke(app, ["verify", str(folder), "--key", str(keys["signer.pub"])])
    assert result.exit_code == 1
    assert "checksums.txt.sig: mismatch: not this key's signature" in result.output


def test_tamper_recompute_and_drop_the_signature_fails_when_one_is_required(
    make_bundle, keys, tmp_path
):
    folder = signed_dir(make_bundle, keys, tmp_path)
    (folder / "README.md").write_text("# all good\n")
    recompute_checksums(folder)
    (folder / "checksums.txt.sig").unlink()
    args = ["verify", str(folder), "--key", str(keys["signer.pub"])]
    result = CliRunner().invoke(app, [*args, "--min-trust-level", "verified"])
    assert result.exit_code == 1 and "checksums.txt.sig: missing: the bundle is unsigned" in (
        result.output
    )


def test_a_bundle_signed_by_another_key_fails(make_bundle, keys, tmp_path):
    folder = signed_dir(make_bundle, keys, tmp_path)
    verdict = verify(folder, pub(keys, "other.pub"))
    assert [(p.path, p.kind) for p in verdict.problems] == [("checksums.txt.sig", "mismatch")]


def test_a_changed_file_fails_even_with_a_good_signature(make_bundle, keys, tmp_path):
    folder = signed_dir(make_bundle, keys, tmp_path)
    (folder / "deploy.sh").write_text("#!/bin/sh\n")
    verdict = verify(folder, pub(keys))
    assert [(p.path, p.kind) for p in verdict.problems] == [("deploy.sh", "mismatch")]


@pytest.mark.parametrize(
    ("content", "detail"), [(b"not base64!\n", "not base64"), (b"AAAA\n", "3 bytes")]
)
def test_a_malformed_signature_is_named(make_bundle, keys, tmp_path, content, detail):
    folder = signed_dir(make_bundle, keys, tmp_path)
    (folder / "checksums.txt.sig").write_bytes(content)
    (problem,) = verify(folder, pub(keys)).problems
    assert (problem.path, problem.kind) == ("checksums.txt.sig", "malformed")
    assert detail in problem.detail


def test_the_cli_reports_the_trust_level(make_bundle, keys, tmp_path):
    folder = signed_dir(make_bundle, keys, tmp_path)
    plain = CliRunner().invoke(app, ["verify", str(folder)])
    assert plain.exit_code == 0
    assert "trust level: unverified (signed; no --key to check it)" in plain.output
    keyed = CliRunner().invoke(
        app, ["verify", str(folder), "--key", str(keys["signer.pub"]), "--min-trust-level",
              "verified"],
    )  # fmt: skip
    assert keyed.exit_code == 0 and "trust level: verified" in keyed.output
    unsigned = tmp_path / "u"
    make_bundle("eks-h100-training", "helm").write(unsigned)
    assert (
        "unverified (checksums only: unsigned)"
        in CliRunner().invoke(app, ["verify", str(unsigned)]).output
    )


def test_min_trust_level_verified_without_a_key_is_a_usage_error(make_bundle, tmp_path):
    make_bundle("eks-h100-training", "helm").write(tmp_path)
    result = CliRunner().invoke(app, ["verify", str(tmp_path), "--min-trust-level", "verified"])
    assert result.exit_code == 2 and "needs --key" in result.output


def test_an_unknown_trust_level_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["verify", str(tmp_path), "--min-trust-level", "attested"])
    assert result.exit_code == 2 and "valid: unverified, verified" in result.output


def test_an_rsa_key_is_refused_saying_ed25519(keys):
    with pytest.raises(BundleError, match="not Ed25519"):
        private_key(keys["rsa"].read_bytes())


def test_a_public_key_is_no_signing_key(keys):
    with pytest.raises(BundleError, match="not a private key"):
        private_key(keys["signer.pub"].read_bytes())


def test_an_openssh_key_pair_signs_and_verifies(make_bundle, tmp_path):
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    data = make_bundle("eks-h100-training", "helm").archive("tar.gz")
    path = tmp_path / "b.tar.gz"
    path.write_bytes(sign_archive(data, private_key(key.read_bytes()), "tar.gz"))
    pub_key = public_key(key.with_suffix(".pub").read_bytes())
    assert verify(path, pub_key).trust == "verified"
