"""Log records as one line each, with their context fields, on stderr."""

from __future__ import annotations

import logging
import sys

# Attributes every LogRecord has; anything else came in through `extra=` and is context.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured duplicate of the message
}


class ContextFormatter(logging.Formatter):
    """`time level logger: message key=value ...` so `extra` fields are never lost."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD)
        return f"{line} {context}" if context else line


def configure_logging(level: str) -> None:
    """Send the root logger to stderr at `level`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ContextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
