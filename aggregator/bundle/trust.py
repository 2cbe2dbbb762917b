"""Verifying a bundle, offline, and how far it can be trusted.

Trust levels, after AICR's ``verify``, lowest first:

- ``unknown``: a file does not match ``checksums.txt`` (or the signature does not hold):
  nothing can be said of the bundle.
- ``unverified``: every file matches ``checksums.txt``, and that is all. This proves no
  tampering: whoever edits a file can recompute the checksums.
- ``verified``: as ``unverified``, and ``checksums.txt`` carries a valid signature by the
  public key the verifier gave: the bundle is as its signer made it.

AICR's ``attested`` (an attestation that holds, by an identity not pinned) has no counterpart:
a signature by an unknown key proves nothing, so a signed bundle checked without a key is
``unverified``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from plumb.aggregator.bundle.archive import read_bundle
from plumb.aggregator.bundle.checksums import Problem, check
from plumb.aggregator.bundle.signature import check_signature

__all__ = ["TRUST_LEVELS", "TrustLevel", "Verdict", "verify"]

TrustLevel = Literal["unknown", "unverified", "verified"]
TRUST_LEVELS: tuple[TrustLevel, ...] = ("unknown", "unverified", "verified")


@dataclass(frozen=True)
class Verdict:
    """What ``verify`` found: files checked, every problem, the trust level, and whether the
    bundle carries a signature at all."""

    checked: int
    problems: list[Problem]
    trust: TrustLevel
    signed: bool


def verify(path: Path, key: Ed25519PublicKey | None = None) -> Verdict:
    """The verdict on the bundle at ``path`` (a folder, ``.tar.gz`` or ``.zip``); with ``key``,
    its signature must be that key's."""
    contents = read_bundle(path)
    problems = check(contents.digests, contents.checksums)
    if key is not None and contents.checksums is not None:
        bad = check_signature(contents.checksums, contents.signature, key)
        problems += [bad] if bad else []
    if problems:
        trust: TrustLevel = "unknown"
    else:
        trust = "verified" if key is not None else "unverified"
    return Verdict(len(contents.digests), problems, trust, contents.signature is not None)
