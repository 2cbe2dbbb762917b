"""Who may call the HTTP API: bearer tokens with scopes, web sessions, a trusted auth proxy,
anonymous read, a rate per caller.

Routers declare their scope as a dependency (`ReadAccess`, `AdminAccess`, `PageAccess` for
web pages, which sends a browser to /login instead of answering 401); all share `identify`,
which FastAPI runs once per request: it finds the caller, charges its rate bucket (token
name, else client address) and refuses unknown tokens. A caller is, in this order, the
`Authorization: Bearer` token (aggregator/api/tokens.py), the user an authenticating proxy
names in `api.auth_proxy_header` when the request comes from `api.trusted_proxies`, or the
web session cookie (aggregator/api/sessions.py). The last two are sent by the browser on its
own, so a call that changes state with them must carry the X-Plumb-CSRF header (the session's
secret; for the proxy, any value: other sites cannot add headers without a CORS preflight,
which Plumb never grants) and, when the browser names an Origin, come from this host.
/healthz and /readyz carry no dependency, nor /metrics unless configured so.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from plumb.aggregator.api.limits import RateLimiter
from plumb.aggregator.api.sessions import COOKIE, CSRF_HEADER, Session, Sessions
from plumb.aggregator.api.tokens import Caller, Scope, load_tokens
from plumb.aggregator.errors import Forbidden, RateLimited, Unauthenticated
from plumb.aggregator.settings import ApiSettings

log = logging.getLogger(__name__)

__all__ = [
    "Access",
    "AdminAccess",
    "PageAccess",
    "ReadAccess",
    "SignInNeeded",
    "TrustedProxies",
    "same_origin",
    "session_of",
]

_HINT = "send `Authorization: Bearer <token>` (plumb: PLUMB_API_TOKEN or --token-file)"
_CSRF_HINT = (
    f"send the page's <meta name=plumb-csrf> value in {CSRF_HEADER}, or call with a bearer token"
)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_VIA_PROXY = "plumb_via_trusted_proxy"  # scope["state"] key set by TrustedProxies
_MAX_USER_CHARS = 256  # an e-mail address or a directory name fits; more is not a user name


class SignInNeeded(Exception):
    """A web page was asked for without a caller allowed to read it: go to /login."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class TrustedProxies:
    """ASGI middleware: notes whether the direct peer is one of `api.trusted_proxies`, then
    applies its X-Forwarded-For and -Proto (uvicorn's ProxyHeadersMiddleware), after which the
    peer's own address is no longer known; the auth proxy header is believed only from it."""

    def __init__(self, app, trusted: list[str]):
        self.forwarded = ProxyHeadersMiddleware(app, trusted_hosts=trusted)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            peer = scope.get("client")
            trusted = peer is not None and peer[0] in self.forwarded.trusted_hosts
            scope.setdefault("state", {})[_VIA_PROXY] = trusted
        await self.forwarded(scope, receive, send)


class Access:
    """The tokens, the anonymous-read switch and the rate buckets of one API."""

    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self.tokens = load_tokens(settings.tokens_file) if settings.tokens_file else None
        self.limiter = RateLimiter(settings.rate_per_s, settings.burst)
        # Sessions need tokens to sign in with; the key comes from them (sessions.py).
        self.sessions = (
            Sessions(self.tokens.session_key(), settings.session_lifetime_s)
            if self.tokens is not None
            else None
        )
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
        else:
            caller = self._proxy_user(request) or self._session_caller(request)
        address = request.client.host if request.client else "unknown"
        key = f"token:{caller.name}" if caller else f"address:{address}"
        self.charge(key)
        if header is not None and caller is None:
            log.warning("unknown API token", extra={"client": address, "path": request.url.path})
            raise Unauthenticated("the bearer token is not known", hint=_HINT)
        if caller is not None and header is None and request.method not in _SAFE_METHODS:
            self._check_csrf(request)
        return caller

    def charge(self, key: str) -> None:
        """Take one request from `key`'s bucket; 429 when it is empty."""
        wait = self.limiter.take(key)
        if wait > 0:
            raise RateLimited(
                f"too many requests from {key}: the limit is {self.limiter.rate_per_s:g}/s "
                f"with bursts of {self.limiter.burst}",
                retry_after_s=math.ceil(wait),
                hint="wait Retry-After seconds; ask for a higher PLUMB_API__RATE_PER_S if needed",
            )

    def _proxy_user(self, request: Request) -> Caller | None:
        """The user the trusted auth proxy names, if the mode is on and it names one."""
        name = self.settings.auth_proxy_header
        user = request.headers.get(name) if name else None
        if user is None:
            return None
        if not request.scope.get("state", {}).get(_VIA_PROXY):
            log.warning(
                "auth proxy header from an untrusted client, ignored",
                extra={"header": name, "path": request.url.path},
            )
            return None
        user = user.strip()
        if not 0 < len(user) <= _MAX_USER_CHARS or not user.isprintable():
            raise Unauthenticated(
                f"the auth proxy's {name} header does not hold a user name",
                hint="check the proxy's configuration (docs/security.md)",
            )
        return Caller(f"proxy:{user}", self.settings.auth_proxy_scope)

    def _session_caller(self, request: Request) -> Caller | None:
        """The caller of a valid session cookie; the session is kept for the page."""
        value = request.cookies.get(COOKIE)
        if value is None or self.sessions is None:
            return None
        session = self.sessions.read(value, time.time())
        if session is None:
            return None
        request.state.session = session
        return session.caller

    def _check_csrf(self, request: Request) -> None:
        """Refuse a state change the browser may have been tricked into by another site."""
        if not same_origin(request):
            raise Forbidden(
                f"a call from the page at {request.headers['origin']} may not change state here",
                hint=_CSRF_HINT,
            )
        presented = request.headers.get(CSRF_HEADER)
        session = session_of(request)
        good = session.csrf_matches(presented) if session is not None else bool(presented)
        if not good:
            raise Forbidden(
                f"a call that changes state with the browser's sign-in needs {CSRF_HEADER}",
                hint=_CSRF_HINT,
            )

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


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from a page of another host. Hosts, not
    schemes, are compared: behind a proxy that ends TLS the aggregator itself sees http."""
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


def session_of(request: Request) -> Session | None:
    """The web session `identify` found on this request, if it came with one."""
    return getattr(request.state, "session", None)


def _requires(scope: Scope):
    async def check(request: Request, caller: Annotated[Caller | None, Depends(identify)]) -> None:
        request.app.state.access.require(caller, scope, request)

    return Depends(check)


async def _page(request: Request, caller: Annotated[Caller | None, Depends(identify)]) -> None:
    try:
        request.app.state.access.require(caller, "read", request)
    except Unauthenticated as exc:
        raise SignInNeeded(request.url.path) from exc


ReadAccess = _requires("read")
AdminAccess = _requires("admin")
PageAccess = Depends(_page)
