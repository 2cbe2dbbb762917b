"""Log records as one line each, with their context fields, on stderr: text or JSON.

Text is for people at a terminal; JSON (one object a line) is for Loki, Elasticsearch and
the like, so the chart deploys it.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

# Attributes every LogRecord has; anything else came in through `extra=` and is context.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured duplicate of the message
}
# Characters that end a bare logfmt value, so a value holding one is quoted.
_NEEDS_QUOTES = frozenset(' ="\\')


def _context(record: logging.LogRecord) -> dict[str, Any]:
    """The record's `extra=` fields."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


def _quote(value: object) -> str:
    """A logfmt value: bare when it can be, else double-quoted with `"` and `\\` escaped."""
    text = str(value)
    if text and not _NEEDS_QUOTES.intersection(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ContextFormatter(logging.Formatter):
    """`time level logger: message key=value ...` so `extra` fields are never lost."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = " ".join(f"{k}={_quote(v)}" for k, v in _context(record).items())
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
