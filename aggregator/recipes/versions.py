"""Version-aware comparison and the constraint expressions built on it.

A version is an optional ``v``, dot-separated numbers, and a suffix after ``-`` or ``+`` that
is ignored: ``570.86.15``, ``6.8.0-1030-aws`` (= 6.8.0), ``v1.33.5-eks-113cf36`` (= 1.33.5).
Ordering pads the shorter side with zeros (``6.8 == 6.8.0 < 6.8.1``), which makes it a total
order. ``==`` and ``!=`` are precision-aware instead: ``12.8.1 == 12.8`` holds, because a
constraint written to two places means "this minor release".

An expression is one or more comma-separated clauses that must all hold: ``>= 570, < 600``.
A clause without an operator means ``==``; operands that are not versions compare as strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

__all__ = ["Expression", "ExpressionError", "Version", "compare", "parse_version"]

_VERSION = re.compile(r"^[vV]?(\d+(?:\.\d+)*)(?:[-+].*)?$")
_CLAUSE = re.compile(r"^(==|!=|>=|<=|>|<)?\s*([^=!<>\s](?:.*\S)?)$")
_ORDERING = {">=", "<=", ">", "<"}


class ExpressionError(ValueError):
    """An expression that cannot be parsed or an ordering operator on a non-version."""


@total_ordering
@dataclass(frozen=True)
class Version:
    """A parsed version: its numeric parts; the text it came from is kept for display."""

    parts: tuple[int, ...]
    text: str

    def _padded(self, width: int) -> tuple[int, ...]:
        return self.parts + (0,) * (width - len(self.parts))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return compare(self, other) == 0

    def __lt__(self, other: Version) -> bool:
        return compare(self, other) < 0

    def __hash__(self) -> int:
        parts = self.parts
        while parts and parts[-1] == 0:
            parts = parts[:-1]
        return hash(parts)

    def prefix_equals(self, operand: Version) -> bool:
        """True when this version starts with every part written in ``operand``."""
        return self._padded(len(operand.parts))[: len(operand.parts)] == operand.parts

    @property
    def branch(self) -> str:
        """The driver branch a driver version belongs to: ``570`` for ``570.86.15``."""
        return str(self.parts[0])

    @property
    def major_minor(self) -> str:
        """``12.8`` for ``12.8.1``: the key of CUDA tables."""
        return ".".join(str(p) for p in self._padded(2)[:2])


def parse_version(text: str) -> Version | None:
    """The Version in ``text``, or None when it does not look like one."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return Version(tuple(int(p) for p in match.group(1).split(".")), text.strip())


def compare(a: Version, b: Version) -> int:
    """-1, 0 or 1 as ``a`` is below, equal to or above ``b`` (shorter side zero-padded)."""
    width = max(len(a.parts), len(b.parts))
    left, right = a._padded(width), b._padded(width)
    return (left > right) - (left < right)


@dataclass(frozen=True)
class Clause:
    """One ``op operand`` pair of an expression."""

    op: str
    operand: str

    def holds(self, observed: str) -> bool:
        """Whether ``observed`` satisfies this clause."""
        want, have = parse_version(self.operand), parse_version(observed)
        if want is None or have is None:
            if self.op in _ORDERING:
                return False  # an unparseable observation never satisfies an ordering
            equal = observed.strip() == self.operand
        elif self.op in _ORDERING:
            sign = compare(have, want)
            return {">=": sign >= 0, "<=": sign <= 0, ">": sign > 0, "<": sign < 0}[self.op]
        else:
            equal = have.prefix_equals(want)
        return equal if self.op == "==" else not equal


@dataclass(frozen=True)
class Expression:
    """A conjunction of clauses, parsed from text like ``>= 570, < 600``."""

    clauses: tuple[Clause, ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> Expression:
        """Parse ``text``; raises ExpressionError naming the bad clause."""
        clauses = []
        for raw in str(text).split(","):
            match = _CLAUSE.match(raw.strip())
            if match is None:
                raise ExpressionError(f"empty clause in expression {text!r}")
            op, operand = match.group(1) or "==", match.group(2)
            if op in _ORDERING and parse_version(operand) is None:
                raise ExpressionError(f"{op} needs a version operand, got {operand!r}")
            clauses.append(Clause(op, operand))
        return cls(tuple(clauses), str(text))

    def holds(self, observed: str) -> bool:
        """Whether ``observed`` satisfies every clause."""
        return all(c.holds(observed) for c in self.clauses)
