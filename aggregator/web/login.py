"""Signing in to the web page: `/login` trades an API token for a session cookie, `/logout`
drops it.

The token is checked against the API's own token table (api/access.py) and never stored: the
cookie names the token and its scope, signed (api/sessions.py). The cookie is HttpOnly (no
script reads it), SameSite=Strict (no other site's page sends it), Secure when the request
came over TLS (directly, or per X-Forwarded-Proto from a trusted proxy) and expires with
`api.session_lifetime_s`. Both forms refuse a post from another site's page (Origin), so a
stranger can neither sign a browser in as themselves nor out; log-out also needs the
session's CSRF secret. Sign-in attempts share the client address's rate bucket.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from plumb.aggregator.api.access import Access, same_origin
from plumb.aggregator.api.sessions import COOKIE
from plumb.aggregator.web import pages

log = logging.getLogger(__name__)

router = APIRouter(include_in_schema=False)

_FORM = "application/x-www-form-urlencoded"


def _next(path: str | None) -> str:
    """Where to go after signing in: a path on this site, never another site (`//host`)."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return "/"
    if not path.isprintable() or path.startswith("/login"):
        return "/"
    return path


def _form_page(next_path: str, error: str, status: int) -> HTMLResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="plumb"'} if status == 401 else None
    page = pages.login_page(next_path, datetime.now(UTC), error=error)
    return HTMLResponse(page, status_code=status, headers=headers)


async def _form(request: Request) -> dict[str, str] | None:
    """The posted form's fields (first value of each), or None when it is not a form."""
    if request.headers.get("content-type", "").split(";")[0].strip() != _FORM:
        return None
    try:
        text = (await request.body()).decode("utf-8")
        fields = parse_qs(text, max_num_fields=8, strict_parsing=bool(text))
    except (UnicodeDecodeError, ValueError):
        return None
    return {k: v[0] for k, v in fields.items()}


@router.get("/login", response_class=HTMLResponse)
async def login_form(next_path: Annotated[str, Query(alias="next")] = "/") -> str:
    """The sign-in form; `next` is the page to go on to."""
    return pages.login_page(_next(next_path), datetime.now(UTC))


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the posted token; on success set the session cookie and go on to `next`."""
    access: Access = request.app.state.access
    address = request.client.host if request.client else "unknown"
    access.charge(f"address:{address}")
    form = await _form(request)
    next_path = _next(form.get("next") if form else None)
    if not same_origin(request):
        return _form_page(next_path, "Sign in from this site's own page.", 403)
    if form is None:
        return _form_page(next_path, "The sign-in form was not posted as a form.", 400)
    if access.tokens is None or access.sessions is None:
        return _form_page(
            next_path,
            "This aggregator has no API tokens to sign in with (PLUMB_API__TOKENS_FILE).",
            503,
        )
    caller = access.tokens.identify(form.get("token", "").strip())
    if caller is None:
        log.warning("unknown API token at sign-in", extra={"client": address})
        return _form_page(next_path, "That token is not known.", 401)
    value, _ = access.sessions.issue(caller, time.time())
    log.info("web sign-in", extra={"token": caller.name, "scope": caller.scope})
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(
        COOKIE,
        value,
        max_age=int(access.sessions.lifetime_s),
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Drop the session cookie and show the sign-in form."""
    access: Access = request.app.state.access
    value = request.cookies.get(COOKIE)
    session = access.sessions.read(value, time.time()) if value and access.sessions else None
    form = await _form(request) or {}
    if not same_origin(request) or (session and not session.csrf_matches(form.get("csrf"))):
        return _form_page("/", "Log out from this site's own page.", 403)
    if session is not None:
        log.info("web sign-out", extra={"token": session.caller.name})
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        COOKIE, path="/", secure=request.url.scheme == "https", httponly=True, samesite="strict"
    )
    return response
