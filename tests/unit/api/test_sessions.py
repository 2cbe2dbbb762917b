"""Web session cookies: they carry a token's name and scope, never the token, and any change to
them, another key or the passing of their lifetime makes them worthless."""

from __future__ import annotations

import base64
import json

import pytest

from plumb.aggregator.api.sessions import Sessions
from plumb.aggregator.api.tokens import Caller, TokenTable

TOKEN = "s3cr3t-admin-token-0123456789"
TABLE = TokenTable([(TOKEN, Caller("ops", "admin")), ("r" * 20, Caller("ci", "read"))])
NOW = 1_800_000_000.0


def _payload(value: str) -> dict:
    part = value.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_a_session_reads_back_as_the_token_s_name_and_scope_until_it_expires():
    sessions = Sessions(TABLE.session_key(), lifetime_s=3600)
    value, issued = sessions.issue(Caller("ops", "admin"), NOW)
    assert TOKEN not in value and TOKEN not in json.dumps(_payload(value))
    assert _payload(value) == {"n": "ops", "s": "admin", "x": 1_800_003_600, "c": issued.csrf}
    read = sessions.read(value, NOW + 3599)
    assert read == issued and read.caller == Caller("ops", "admin")
    assert sessions.read(value, NOW + 3600) is None


def test_two_sessions_have_different_csrf_secrets():
    sessions = Sessions(TABLE.session_key(), lifetime_s=60)
    first, second = (sessions.issue(Caller("ci", "read"), NOW)[1] for _ in range(2))
    assert first.csrf != second.csrf and len(first.csrf) >= 32
    assert first.csrf_matches(first.csrf) and not first.csrf_matches(second.csrf)
    assert not first.csrf_matches(None)


def test_raising_the_scope_in_the_cookie_breaks_its_signature():
    sessions = Sessions(TABLE.session_key(), lifetime_s=60)
    value, _ = sessions.issue(Caller("ci", "read"), NOW)
    body = _payload(value) | {"s": "admin"}
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    assert sessions.read(f"{forged}.{value.split('.')[1]}", NOW) is None


def test_a_cookie_from_another_tokens_file_is_refused():
    other = TokenTable([(TOKEN + "x", Caller("ops", "admin"))])
    assert other.session_key() != TABLE.session_key()
    value, _ = Sessions(other.session_key(), 60).issue(Caller("ops", "admin"), NOW)
    assert Sessions(TABLE.session_key(), 60).read(value, NOW) is None


def test_the_key_is_the_same_for_the_same_tokens_in_any_order():
    entries = [(TOKEN, Caller("ops", "admin")), ("r" * 20, Caller("ci", "read"))]
    assert TokenTable(entries[::-1]).session_key() == TABLE.session_key()
    demoted = [(TOKEN, Caller("ops", "read")), ("r" * 20, Caller("ci", "read"))]
    assert TokenTable(demoted).session_key() != TABLE.session_key()


@pytest.mark.parametrize(
    "junk", ["", ".", "a.b.c", "no-dot", "é.é", "x" * 5000, "eyJ9.AAAA", "!!!.???"]
)
def test_junk_is_no_session(junk):
    assert Sessions(TABLE.session_key(), 60).read(junk, NOW) is None
