"""HTTP API tokens: the tokens file, its scopes, and finding a presented token in constant time.

The file holds one token per line, `NAME SCOPE TOKEN`, with `#` comments and blank lines:

    # name       scope  token
    grafana-ci   read   3f9c1e0d6b2a4c8e9f7a5b3d1c0e2f4a
    ops          admin  b7e2d9c4a1f0e3b6c8d5a2f9e0b1c4d7

`read` may call every query (nodes, drift, recipes, snapshot, bundles); `admin` may also start
validations and accept baselines. Names appear in logs and rate-limit keys; tokens never do.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from plumb.aggregator.errors import InvalidInput, TooLarge

Scope = Literal["read", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "admin")
# Shorter tokens can be guessed; `openssl rand -hex 16` gives 32 characters.
MIN_TOKEN_CHARS = 16
# Ten thousand lines of ~100 characters; a file past it is not a tokens file (a log, a
# device), and reading it whole would hold the start-up.
MAX_FILE_BYTES = 1 << 20

__all__ = ["MIN_TOKEN_CHARS", "SCOPES", "Caller", "Scope", "TokenTable", "load_tokens"]


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: a token's name and scope."""

    name: str
    scope: Scope

    def may(self, scope: Scope) -> bool:
        """Admin implies read."""
        return self.scope == "admin" or scope == self.scope


class TokenTable:
    """The known tokens; `identify` compares against every one, whatever matches first."""

    def __init__(self, entries: list[tuple[str, Caller]]):
        self._entries = [(token.encode(), caller) for token, caller in entries]

    def __len__(self) -> int:
        return len(self._entries)

    def identify(self, presented: str) -> Caller | None:
        """The caller whose token is `presented`, or None; the time taken does not say which."""
        given = presented.encode()
        found: Caller | None = None
        for token, caller in self._entries:
            if hmac.compare_digest(given, token) and found is None:
                found = caller
        return found

    def session_key(self) -> bytes:
        """A key for signing web sessions (aggregator/api/sessions.py), derived from every
        token: replicas reading the same file agree on it, and any change of a token ends
        every session signed with the old key."""
        mac = hmac.new(b"plumb web session v1", digestmod=hashlib.sha256)
        for token, caller in sorted(self._entries, key=lambda entry: entry[0]):
            mac.update(
                b"%d:%s %s %s\n" % (len(token), token, caller.name.encode(), caller.scope.encode())
            )
        return mac.digest()


def load_tokens(path: Path) -> TokenTable:
    """Parse a tokens file; errors name the file and line, never the token."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the API tokens file {path} is not UTF-8 text") from exc
    except OSError as exc:
        raise InvalidInput(
            f"cannot read the API tokens file {path}: {exc.strerror}",
            hint="set PLUMB_API__TOKENS_FILE to a readable file of `NAME SCOPE TOKEN` lines",
        ) from exc
    if len(raw) > MAX_FILE_BYTES:
        raise TooLarge(
            f"the API tokens file {path} exceeds {MAX_FILE_BYTES} bytes",
            hint="PLUMB_API__TOKENS_FILE holds one `NAME SCOPE TOKEN` line per token",
        )
    entries: list[tuple[str, Caller]] = []
    names: set[str] = set()
    tokens: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{path}:{number}"
        if len(fields) != 3:
            raise InvalidInput(
                f"{where}: expected `NAME SCOPE TOKEN`, found {len(fields)} fields",
                hint="one token per line; the token itself may not contain spaces or #",
            )
        name, scope, token = fields
        if scope not in SCOPES:
            raise InvalidInput(
                f"{where}: token {name!r} has unknown scope {scope!r}",
                hint=f"use one of: {', '.join(SCOPES)}",
            )
        if len(token) < MIN_TOKEN_CHARS:
            raise InvalidInput(
                f"{where}: token {name!r} is shorter than {MIN_TOKEN_CHARS} characters",
                hint="generate one with `openssl rand -hex 16`",
            )
        if name in names:
            raise InvalidInput(f"{where}: token name {name!r} is used twice", hint="rename one")
        if token in tokens:
            raise InvalidInput(
                f"{where}: token {name!r} repeats an earlier line's token",
                hint="give every caller its own token",
            )
        names.add(name)
        tokens.add(token)
        entries.append((token, Caller(name, scope)))  # type: ignore[arg-type]
    if not entries:
        raise InvalidInput(
            f"the API tokens file {path} holds no tokens",
            hint="add `NAME SCOPE TOKEN` lines, or unset PLUMB_API__TOKENS_FILE",
        )
    return TokenTable(entries)
