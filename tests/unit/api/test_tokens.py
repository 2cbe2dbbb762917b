"""The API tokens file: what it accepts, what it refuses (naming file and line, never the
token), and which caller a presented token is."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb.aggregator.api.tokens import Caller, load_tokens
from plumb.aggregator.errors import InvalidInput

ADMIN = "a" * 32
READ = "r" * 32


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    return path


def test_names_scopes_comments_and_blank_lines(tmp_path):
    table = load_tokens(
        _file(tmp_path, f"# name scope token\n\nops admin {ADMIN}  # on-call\nci read {READ}\n")
    )
    assert len(table) == 2
    assert table.identify(ADMIN) == Caller("ops", "admin")
    assert table.identify(READ) == Caller("ci", "read")
    assert table.identify("x" * 32) is None
    assert table.identify(ADMIN[:-1]) is None
    assert table.identify("") is None


def test_admin_implies_read_and_read_is_not_admin():
    assert Caller("ops", "admin").may("read") and Caller("ops", "admin").may("admin")
    assert Caller("ci", "read").may("read") and not Caller("ci", "read").may("admin")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"ops admin {ADMIN} extra\n", ":1: expected `NAME SCOPE TOKEN`, found 4 fields"),
        (f"# header\nops root {ADMIN}\n", ":2: token 'ops' has unknown scope 'root'"),
        ("ops admin short-secret\n", ":1: token 'ops' is shorter than 16 characters"),
        (f"ops admin {ADMIN}\nops read {READ}\n", ":2: token name 'ops' is used twice"),
        (f"ops admin {ADMIN}\nci read {ADMIN}\n", ":2: token 'ci' repeats an earlier line"),
        ("# nothing yet\n", "holds no tokens"),
    ],
)
def test_a_bad_file_names_the_line_and_never_the_token(tmp_path, text, says):
    path = _file(tmp_path, text)
    with pytest.raises(InvalidInput) as info:
        load_tokens(path)
    assert str(path) in str(info.value) and says in str(info.value)
    assert info.value.hint
    for secret in (ADMIN, READ, "short-secret"):
        assert secret not in str(info.value) + info.value.hint


def test_a_missing_file_says_which_setting_to_fix(tmp_path):
    with pytest.raises(InvalidInput) as info:
        load_tokens(tmp_path / "absent")
    assert "absent" in str(info.value) and "PLUMB_API__TOKENS_FILE" in info.value.hint
