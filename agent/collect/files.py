"""Reading one fact from the host root's files: a value, not_supported, or an error saying why.

The host, kernel and systemd collectors share it, so every file-backed fact fails the same way
and one field's failure never loses the others.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from plumb.facts import MAX_VALUE_CHARS, Reading

__all__ = ["Failed", "NotSupported", "bounded", "failure", "first_line", "read"]


class NotSupported(Exception):
    """The host has nothing to report for this fact (e.g. no fabric manager without NVSwitch)."""


class Failed(Exception):
    """The fact should be there but is not; the message says why."""


def read(call: Callable[[], str | bool]) -> Reading:
    """The Reading of `call()`: ok, not_supported on NotSupported, an error on anything else."""
    try:
        return Reading.ok(call())
    except NotSupported:
        return Reading.not_supported()
    except Exception as exc:  # one field's failure must never lose the others
        return failure(exc)


def failure(exc: Exception) -> Reading:
    """The error reading for `exc`, worded for an SRE: the file and the reason where known."""
    if isinstance(exc, Failed):
        return Reading.failed(str(exc))
    if isinstance(exc, OSError):
        return Reading.failed(f"cannot read {exc.filename}: {exc.strerror or exc}")
    return Reading.failed(f"{type(exc).__name__}: {exc}")


def first_line(path: Path) -> str:
    return path.read_text().strip().splitlines()[0].strip()


def bounded(text: str, what: str) -> str:
    """`text`, or Failed when it is longer than a fact may carry (the wire refuses it whole)."""
    if len(text) > MAX_VALUE_CHARS:
        raise Failed(
            f"{what} is {len(text)} characters, more than the {MAX_VALUE_CHARS} a fact holds"
        )
    return text
