"""Log records as one line each, with their context fields, on stderr.

Log lines carry text that agents and HTTP clients chose (a fact path, a version, a refused
value), so nothing in a record can start a line of its own or pose as a field: control
characters (newlines, ANSI escapes, NUL, the Unicode line separators) and backslashes are
escaped everywhere in the line, tracebacks included, and a context value holding a space, a
quote or an `=` is quoted.
"""

from __future__ import annotations

import logging
import re
import sys

__all__ = ["ContextFormatter", "configure_logging", "escape"]

# Attributes every LogRecord has; anything else came in through `extra=` and is context.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured duplicate of the message
}
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
        context = " ".join(
            f"{escape(k)}={_field(v)}" for k, v in vars(record).items() if k not in _STANDARD
        )
        return f"{line} {context}" if context else line


def configure_logging(level: str) -> None:
    """Send the root logger to stderr at `level`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ContextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
