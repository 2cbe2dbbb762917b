"""Log records as one line each, with their context fields, on stderr: text or JSON.

Text is for people at a terminal; JSON (one object a line) is for Loki, Elasticsearch and
the like, so the chart deploys it.

Log lines carry text that agents and HTTP clients chose (a fact path, a version, a refused
value), so nothing in a record can start a line of its own or pose as a field. In text,
control characters (newlines, ANSI escapes, NUL, the Unicode line separators) and
backslashes are escaped everywhere in the line, tracebacks included, and a context value
holding a space, a quote or an `=` is quoted; JSON escapes them itself.

A line logged while an HTTP request is served carries that request's id (`request_id`, the
`X-Request-Id` the aggregator answers with): the API sets `REQUEST_ID` for the request, and
both formatters add it, so no call site has to pass it.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

__all__ = [
    "LOG_FORMATS",
    "REQUEST_ID",
    "ContextFormatter",
    "JsonFormatter",
    "LogFormat",
    "configure_logging",
    "escape",
]

# Attributes every LogRecord has; anything else came in through `extra=` and is context.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured duplicate of the message
}


# The id of the HTTP request being served in this context; None outside a request. Read when
# a record is formatted, which logging's stream handlers do in the logging call's own context.
REQUEST_ID: ContextVar[str | None] = ContextVar("plumb_request_id", default=None)


def _context(record: logging.LogRecord) -> dict[str, Any]:
    """The record's `extra=` fields, and the id of the request it was logged for."""
    context = {k: v for k, v in vars(record).items() if k not in _STANDARD}
    request_id = REQUEST_ID.get()
    if request_id is not None:
        context.setdefault("request_id", request_id)
    return context


# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the escape itself.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\\\\]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A context value that would read as several fields, or as none, unless quoted.
_NEEDS_QUOTES = re.compile(r'[\s"=]|^$')


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape(text: str) -> str:
    """`text` with every control character and backslash written as its escape."""
    return _UNSAFE.sub(_escaped, text)


def _field(value: object) -> str:
    text = escape(str(value))
    if _NEEDS_QUOTES.search(text):
        return '"' + text.replace('"', '\\"') + '"'
    return text


class ContextFormatter(logging.Formatter):
    """`time level logger: message key=value ...`, one line, so `extra` fields are never lost
    and no logged text can forge a line or a field."""

    def format(self, record: logging.LogRecord) -> str:
        line = escape(super().format(record))
        context = " ".join(f"{escape(k)}={_field(v)}" for k, v in _context(record).items())
        return f"{line} {context}" if context else line


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, RFC 3339), level, logger, message, context.

    Context fields sit beside the fixed keys (as Loki's `json` stage and Elasticsearch expect)
    and never replace them; values JSON cannot hold are written as their `str()`.
    """

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            **_context(record),
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    """Send the root logger to stderr at `level`, as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(ContextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
