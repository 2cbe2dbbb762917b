"""The log formatter: one line per record, whatever text a record carries (issue 16, row 7)."""

from __future__ import annotations

import logging

from plumb.logs import ContextFormatter

FORGED = "2099-01-01 00:00:00,000 INFO plumb.aggregator.api: admin token issued"


def _format(msg: str, *args: object, exc: BaseException | None = None, **extra: object) -> str:
    record = logging.LogRecord("plumb.test", logging.WARNING, __file__, 1, msg, args, None)
    if exc is not None:
        try:
            raise exc
        except BaseException as raised:
            record.exc_info = (type(raised), raised, raised.__traceback__)
    record.__dict__.update(extra)
    return ContextFormatter("%(levelname)s %(name)s: %(message)s").format(record)


def test_a_newline_in_a_context_field_is_escaped_not_a_new_line():
    line = _format("stream opened", agent_version=f"1.0\n{FORGED}")
    assert "\n" not in line
    assert line == f'WARNING plumb.test: stream opened agent_version="1.0\\n{FORGED}"'


def test_a_newline_in_the_message_or_its_arguments_is_escaped():
    line = _format("refused %s", f"path\r\n{FORGED}")
    assert line == f"WARNING plumb.test: refused path\\r\\n{FORGED}"


def test_terminal_escapes_nul_and_unicode_line_separators_are_escaped():
    line = _format("x", value="\x1b[2J\x00a\u2028b\x85")
    assert line == "WARNING plumb.test: x value=\\x1b[2J\\x00a\\u2028b\\x85"


def test_a_backslash_is_escaped_so_an_escape_cannot_be_faked():
    assert _format("x", value="a\\nb") == "WARNING plumb.test: x value=a\\\\nb"


def test_a_value_with_spaces_or_equals_cannot_pose_as_another_field():
    line = _format("stream opened", node="a node=victim", agent_version='say "hi"')
    assert line == (
        'WARNING plumb.test: stream opened node="a node=victim" agent_version="say \\"hi\\""'
    )


def test_plain_values_stay_unquoted():
    assert _format("x", node="gpu-1", seq=3) == "WARNING plumb.test: x node=gpu-1 seq=3"


def test_a_traceback_stays_on_the_records_line():
    line = _format("failed", exc=ValueError(f"bad\n{FORGED}"))
    assert "\n" not in line
    assert line.startswith("WARNING plumb.test: failed\\nTraceback (most recent call last):")
    assert line.endswith(f"ValueError: bad\\n{FORGED}")
