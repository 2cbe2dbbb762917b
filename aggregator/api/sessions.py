"""The web page's sign-in session: a signed, expiring cookie that names a token, never holds it.

A browser cannot send a bearer token, so `/login` checks one against the API's token table
once and sets the cookie `plumb_session = PAYLOAD.SIGNATURE`: PAYLOAD is base64url JSON of
the token's name and scope, the expiry and a random CSRF secret; SIGNATURE is HMAC-SHA256
over PAYLOAD. The key is derived from the tokens file (`TokenTable.session_key`), so every
replica mounting the same Secret accepts the others' cookies with nothing more to configure,
and changing the file ends every session. Nothing is kept server-side: logging out drops the
cookie from the browser, and a copied cookie stays good until it expires
(`api.session_lifetime_s`), as a copied token would until it is removed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from plumb.aggregator.api.tokens import SCOPES, Caller

COOKIE = "plumb_session"
# Calls that change state with the session cookie carry the session's CSRF secret here.
CSRF_HEADER = "X-Plumb-CSRF"
# A browser keeps cookies up to 4 KiB; anything longer was not set by us.
_MAX_COOKIE_CHARS = 4096

__all__ = ["COOKIE", "CSRF_HEADER", "Session", "Sessions"]


@dataclass(frozen=True)
class Session:
    """A signed-in browser: whose token it showed, until when, and its CSRF secret."""

    caller: Caller
    csrf: str
    expires_at: int  # seconds since the epoch

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf.encode())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Issues and reads session cookies under one key."""

    def __init__(self, key: bytes, lifetime_s: float):
        self._key = key
        self.lifetime_s = lifetime_s

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def issue(self, caller: Caller, now: float) -> tuple[str, Session]:
        """A new session for `caller` and its cookie value."""
        session = Session(caller, secrets.token_urlsafe(24), int(now + self.lifetime_s))
        body = {"n": caller.name, "s": caller.scope, "x": session.expires_at, "c": session.csrf}
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}", session

    def read(self, value: str, now: float) -> Session | None:
        """The session `value` carries, or None when it is forged, altered, expired or junk."""
        if len(value) > _MAX_COOKIE_CHARS or value.count(".") != 1:
            return None
        payload, signature = value.split(".")
        try:
            payload.encode("ascii")
            good = hmac.compare_digest(signature.encode("ascii"), self._sign(payload).encode())
        except UnicodeEncodeError:
            return None
        if not good:
            return None
        try:
            body = json.loads(_unb64(payload))
            name, scope, expires_at, csrf = body["n"], body["s"], body["x"], body["c"]
        except (ValueError, binascii.Error, KeyError, TypeError):
            return None
        if scope not in SCOPES or not isinstance(expires_at, int) or expires_at <= now:
            return None
        return Session(Caller(str(name), scope), str(csrf), expires_at)
