"""Plumb's typed errors and the one table that maps them to HTTP, gRPC and exit statuses.

Hierarchy: PlumbError (internal) > InvalidInput (> TooLarge), NotFound, Conflict,
Unauthenticated, Forbidden, RateLimited, Unavailable.
The core raises these; each transport maps `code` through STATUS exactly once.
"""

from __future__ import annotations

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


# code: (HTTP status, gRPC status, CLI exit code)
STATUS: dict[str, tuple[int, grpc.StatusCode, int]] = {
    "invalid_input": (400, grpc.StatusCode.INVALID_ARGUMENT, 2),
    "too_large": (413, grpc.StatusCode.RESOURCE_EXHAUSTED, 2),
    "not_found": (404, grpc.StatusCode.NOT_FOUND, 3),
    "conflict": (409, grpc.StatusCode.FAILED_PRECONDITION, 8),
    "unauthenticated": (401, grpc.StatusCode.UNAUTHENTICATED, 6),
    "forbidden": (403, grpc.StatusCode.PERMISSION_DENIED, 4),
    "rate_limited": (429, grpc.StatusCode.RESOURCE_EXHAUSTED, 7),
    "unavailable": (503, grpc.StatusCode.UNAVAILABLE, 5),
    "internal": (500, grpc.StatusCode.INTERNAL, 1),
}
