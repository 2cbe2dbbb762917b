"""The `X-Request-Id` of every HTTP response, and of the log lines and error body it caused.

An incoming `X-Request-Id` is kept when it is sane (1 to 128 letters, digits and `._:-`, as a
proxy or a client's trace id is), so a request can be followed from the caller's logs into
ours; anything else is replaced by a fresh id, since the id lands in log lines and headers. The
id is set in plumb.logs' REQUEST_ID for the request's context (every log line of the request
carries it) and in `scope["state"]`, where the error handlers read it (`request.state`).
"""

from __future__ import annotations

import re
import uuid

from plumb.aggregator.api.limits import ASGIApp, Message, Receive, Scope, Send
from plumb.logs import REQUEST_ID

__all__ = ["HEADER", "RequestId", "request_id_of"]

HEADER = "X-Request-Id"
_SANE = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def request_id_of(scope: Scope) -> str | None:
    """The id RequestId gave this request (None outside the middleware, as in some tests)."""
    return scope.get("state", {}).get("request_id")


class RequestId:
    """Gives each HTTP request an id and answers with it in `X-Request-Id`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)
        rid = given.decode() if given is not None and _SANE.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        header = (b"x-request-id", rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != header[0]]
                message = {**message, "headers": [*headers, header]}
            await send(message)

        token = REQUEST_ID.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
