"""``checksums.txt`` (``sha256sum`` format) and checking a bundle against it.

A bundle verifies when every file it holds, except ``checksums.txt`` and its signature
``checksums.txt.sig`` (made after it, see signature.py), is listed with its SHA-256 and
nothing listed is absent: a changed byte, a missing file and an extra file are each a
problem naming the file. ``sha256sum -c checksums.txt`` checks the same digests.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CHECKSUMS", "SIGNATURE", "Problem", "checksums_text", "check"]

CHECKSUMS = "checksums.txt"
SIGNATURE = "checksums.txt.sig"
_LINE = re.compile(r"^(?P<digest>[0-9a-f]{64})  (?P<path>\S.*)$")


@dataclass(frozen=True)
class Problem:
    """Why one file of a bundle does not verify."""

    path: str
    kind: Literal["mismatch", "missing", "extra", "malformed", "unreadable"]
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.detail}"


def checksums_text(files: Mapping[str, bytes]) -> str:
    """``<sha256>  <path>`` per file, sorted by path; ``checksums.txt`` itself excluded."""
    return "".join(
        f"{hashlib.sha256(files[p]).hexdigest()}  {p}\n" for p in sorted(files) if p != CHECKSUMS
    )


def check(digests: Mapping[str, str], listing: bytes | None) -> list[Problem]:
    """Every problem of a bundle's files (path -> SHA-256 hex) against ``listing``, the bytes
    of its ``checksums.txt`` (None when it has none)."""
    if listing is None:
        return [Problem(CHECKSUMS, "missing", "the bundle has no checksums.txt")]
    try:
        text = listing.decode("utf-8")
    except UnicodeDecodeError:
        return [Problem(CHECKSUMS, "malformed", "not UTF-8 text")]
    listed: dict[str, str] = {}
    problems: list[Problem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _LINE.match(line)
        if match is None or match["path"] in listed:
            problems.append(Problem(CHECKSUMS, "malformed", f"line {number}: {line[:80]!r}"))
            continue
        listed[match["path"]] = match["digest"]
    for path in sorted(set(listed) | set(digests) - {CHECKSUMS, SIGNATURE}):
        if path not in digests:
            problems.append(Problem(path, "missing", "listed in checksums.txt, not in the bundle"))
        elif path not in listed:
            problems.append(Problem(path, "extra", "in the bundle, not listed in checksums.txt"))
        elif (got := digests[path]) != listed[path]:
            problems.append(
                Problem(path, "mismatch", f"sha256 {got[:12]}…, listed {listed[path][:12]}…")
            )
    return problems
