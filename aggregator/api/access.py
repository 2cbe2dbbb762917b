"""Who may call the HTTP API: bearer tokens with scopes, anonymous read, a rate per caller.

Routers declare their scope as a dependency (`ReadAccess`, `AdminAccess`); both share
`identify`, which FastAPI runs once per request: it finds the token (aggregator/api/tokens.py),
charges the caller's rate bucket (token name, else client address) and refuses unknown
tokens. /healthz and /readyz carry no dependency, nor /metrics unless configured so.
"""

from __future__ import annotations

import logging
import math
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from plumb.aggregator.api.limits import RateLimiter
from plumb.aggregator.api.tokens import Caller, Scope, load_tokens
from plumb.aggregator.errors import Forbidden, RateLimited, Unauthenticated
from plumb.aggregator.settings import ApiSettings

log = logging.getLogger(__name__)

__all__ = ["Access", "AdminAccess", "ReadAccess"]

_HINT = "send `Authorization: Bearer <token>` (plumb: PLUMB_API_TOKEN or --token-file)"


class Access:
    """The tokens, the anonymous-read switch and the rate buckets of one API."""

    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self.tokens = load_tokens(settings.tokens_file) if settings.tokens_file else None
        self.limiter = RateLimiter(settings.rate_per_s, settings.burst)
        if self.tokens is None and not settings.anonymous_read:
            log.warning(
                "the HTTP API has no tokens and no anonymous read: every API call gets 401",
                extra={"hint": "set PLUMB_API__TOKENS_FILE or PLUMB_API__ANONYMOUS_READ"},
            )

    def identify(self, request: Request) -> Caller | None:
        """The caller, or None when anonymous; charges its rate bucket first."""
        header = request.headers.get("authorization")
        caller = None
        if header is not None:
            kind, _, presented = header.partition(" ")
            if kind.lower() == "bearer" and self.tokens is not None:
                caller = self.tokens.identify(presented.strip())
        address = request.client.host if request.client else "unknown"
        key = f"token:{caller.name}" if caller else f"address:{address}"
        wait = self.limiter.take(key)
        if wait > 0:
            raise RateLimited(
                f"too many requests from {key}: the limit is {self.limiter.rate_per_s:g}/s "
                f"with bursts of {self.limiter.burst}",
                retry_after_s=math.ceil(wait),
                hint="wait Retry-After seconds; ask for a higher PLUMB_API__RATE_PER_S if needed",
            )
        if header is not None and caller is None:
            log.warning("unknown API token", extra={"client": address, "path": request.url.path})
            raise Unauthenticated("the bearer token is not known", hint=_HINT)
        return caller

    def require(self, caller: Caller | None, scope: Scope, request: Request) -> None:
        """Refuse unless `caller` (None: anonymous) may use `scope`."""
        if caller is None:
            if scope == "read" and self.settings.anonymous_read:
                return
            raise Unauthenticated(f"this call needs a token with the {scope} scope", hint=_HINT)
        if not caller.may(scope):
            log.warning(
                "API token lacks scope",
                extra={"token": caller.name, "scope": scope, "path": request.url.path},
            )
            raise Forbidden(
                f"token {caller.name!r} has the {caller.scope} scope; this call needs {scope}",
                hint="use a token with the admin scope",
            )
        if scope == "admin":
            log.info(
                "admin call",
                extra={"token": caller.name, "method": request.method, "path": request.url.path},
            )


# Declares the scheme in OpenAPI (/docs); `identify` reads the header itself. The dependencies
# are async so they run on the event loop, never in threads: the rate buckets are not locked.
_bearer = HTTPBearer(auto_error=False, description="an API token (docs/security.md)")


async def identify(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]
) -> Caller | None:
    return request.app.state.access.identify(request)


def _requires(scope: Scope):
    async def check(request: Request, caller: Annotated[Caller | None, Depends(identify)]) -> None:
        request.app.state.access.require(caller, scope, request)

    return Depends(check)


ReadAccess = _requires("read")
AdminAccess = _requires("admin")
