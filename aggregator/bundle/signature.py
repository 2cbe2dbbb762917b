"""Signed bundles: an Ed25519 signature of ``checksums.txt``, made and checked with a key pair.

``checksums.txt`` binds every file's SHA-256, so a signature of its bytes signs the whole
bundle: whoever edits a file and recomputes the checksums cannot make a matching signature
without the private key. The signature is ``checksums.txt.sig`` beside it, base64 of the 64
signature bytes (RFC 8032, deterministic: same key and bundle, same bytes), so OpenSSL checks
it too. Keys are PEM (``openssl genpkey -algorithm ed25519``) or OpenSSH ``ssh-ed25519``.
Signing happens where the private key is (the CLI); the key never travels to the aggregator.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from plumb.aggregator.bundle.archive import Format, archive, read_archive
from plumb.aggregator.bundle.checksums import CHECKSUMS, SIGNATURE, Problem
from plumb.aggregator.bundle.errors import BundleError

__all__ = ["check_signature", "private_key", "public_key", "sign", "sign_archive"]

_KEYGEN_HINT = (
    "make a key pair with: openssl genpkey -algorithm ed25519 -out bundle.key && "
    "openssl pkey -in bundle.key -pubout -out bundle.pub"
)


def private_key(data: bytes) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``data`` (PEM or OpenSSH, unencrypted)."""
    try:
        if data.lstrip().startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"):
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except TypeError as exc:  # the key is encrypted and no password was given
        raise BundleError(
            "the signing key is encrypted; Plumb reads unencrypted keys only",
            hint="decrypt a copy where it is used: openssl pkey -in enc.key -out bundle.key",
        ) from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise BundleError(
            f"not a private key in PEM or OpenSSH form: {exc}", hint=_KEYGEN_HINT
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError(
            f"the signing key is {type(key).__name__.removeprefix('_')}, not Ed25519",
            hint=_KEYGEN_HINT,
        )
    return key


def public_key(data: bytes) -> Ed25519PublicKey:
    """The Ed25519 public key in ``data`` (PEM, or an OpenSSH ``ssh-ed25519`` line)."""
    try:
        if data.lstrip().startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise BundleError(
            f"not a public key in PEM or OpenSSH form: {exc}",
            hint="give the signer's public key: openssl pkey -in bundle.key -pubout",
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise BundleError(f"the key is {type(key).__name__.removeprefix('_')}, not Ed25519")
    return key


def sign(checksums: bytes, key: Ed25519PrivateKey) -> bytes:
    """The content of ``checksums.txt.sig`` for the bytes of ``checksums.txt``."""
    return base64.b64encode(key.sign(checksums)) + b"\n"


def sign_archive(data: bytes, key: Ed25519PrivateKey, fmt: Format) -> bytes:
    """A bundle ``tar.gz`` (as the aggregator sends it) with its signature added, as ``fmt``."""
    bundle = read_archive(data)
    if CHECKSUMS not in bundle.files:
        raise BundleError("the bundle has no checksums.txt to sign")
    files = {**bundle.files, SIGNATURE: sign(bundle.files[CHECKSUMS], key)}
    return archive(bundle.top, files, bundle.executables, fmt)


def check_signature(
    checksums: bytes, signature: bytes | None, key: Ed25519PublicKey
) -> Problem | None:
    """Why ``signature`` is not ``key``'s signature of ``checksums``; None when it is."""
    if signature is None:
        return Problem(SIGNATURE, "missing", "the bundle is unsigned, and a key was given")
    try:
        raw = base64.b64decode(signature.strip(), validate=True)
    except (binascii.Error, ValueError):
        return Problem(SIGNATURE, "malformed", "not base64")
    if len(raw) != 64:
        return Problem(SIGNATURE, "malformed", f"{len(raw)} bytes, an Ed25519 signature has 64")
    try:
        key.verify(raw, checksums)
    except InvalidSignature:
        return Problem(
            SIGNATURE,
            "mismatch",
            "not this key's signature of checksums.txt: the checksums changed after signing, "
            "or another key signed them",
        )
    return None
