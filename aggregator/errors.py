"""Plumb's typed errors and the one table that maps them to HTTP, gRPC and exit statuses.

Hierarchy: PlumbError (internal) > InvalidInput (> TooLarge), NotFound, Conflict,
Unauthenticated, Forbidden, RateLimited, Unavailable.
The core raises these; each transport maps `code` through STATUS exactly once. The CLI reads
EXIT_CODES, the same table's last column, without importing grpc (a tenth of a second).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc


class PlumbError(Exception):
    """Base of every error the core raises on purpose."""

    code = "internal"

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class InvalidInput(PlumbError):
    """The caller sent something malformed or out of bounds."""

    code = "invalid_input"


class TooLarge(InvalidInput):
    """The caller sent more than a limit allows: bytes, nodes of a document, files."""

    code = "too_large"


class NotFound(PlumbError):
    """The named node, entry or resource does not exist."""

    code = "not_found"


class Conflict(PlumbError):
    """The request contradicts the state it acts on (e.g. removing a node that streams)."""

    code = "conflict"


class Unauthenticated(PlumbError):
    """The caller presented no credential, or one that is not known."""

    code = "unauthenticated"


class Forbidden(PlumbError):
    """The caller may not do this, e.g. report for another node."""

    code = "forbidden"


class RateLimited(PlumbError):
    """The caller sent more requests than its share; it may retry after `retry_after_s`."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s


class Unavailable(PlumbError):
    """A dependency (the database) is down; retrying later can work."""

    code = "unavailable"


# code: (HTTP status, gRPC status name, CLI exit code)
_TABLE: dict[str, tuple[int, str, int]] = {
    "invalid_input": (400, "INVALID_ARGUMENT", 2),
    "too_large": (413, "RESOURCE_EXHAUSTED", 2),
    "not_found": (404, "NOT_FOUND", 3),
    "conflict": (409, "FAILED_PRECONDITION", 8),
    "unauthenticated": (401, "UNAUTHENTICATED", 6),
    "forbidden": (403, "PERMISSION_DENIED", 4),
    "rate_limited": (429, "RESOURCE_EXHAUSTED", 7),
    "unavailable": (503, "UNAVAILABLE", 5),
    "internal": (500, "INTERNAL", 1),
}
EXIT_CODES: dict[str, int] = {code: row[2] for code, row in _TABLE.items()}
STATUS: dict[str, tuple[int, grpc.StatusCode, int]]  # built from _TABLE on first use


def __getattr__(name: str) -> Any:
    """STATUS, with grpc's status codes, built when a transport first asks (PEP 562)."""
    if name == "STATUS":
        import grpc

        table = {c: (h, grpc.StatusCode[g], e) for c, (h, g, e) in _TABLE.items()}
        globals()["STATUS"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
