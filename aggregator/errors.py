"""Plumb's typed errors and the one table that maps them to HTTP, gRPC and exit statuses.

Hierarchy: PlumbError (internal) > InvalidInput, NotFound, Forbidden, Unavailable.
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


class NotFound(PlumbError):
    """The named node, entry or resource does not exist."""

    code = "not_found"


class Forbidden(PlumbError):
    """The caller may not do this, e.g. report for another node."""

    code = "forbidden"


class Unavailable(PlumbError):
    """A dependency (the database) is down; retrying later can work."""

    code = "unavailable"


# code: (HTTP status, gRPC status, CLI exit code)
STATUS: dict[str, tuple[int, grpc.StatusCode, int]] = {
    "invalid_input": (400, grpc.StatusCode.INVALID_ARGUMENT, 2),
    "not_found": (404, grpc.StatusCode.NOT_FOUND, 3),
    "forbidden": (403, grpc.StatusCode.PERMISSION_DENIED, 4),
    "unavailable": (503, grpc.StatusCode.UNAVAILABLE, 5),
    "internal": (500, grpc.StatusCode.INTERNAL, 1),
}
