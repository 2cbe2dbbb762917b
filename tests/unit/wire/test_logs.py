"""Log lines: text with logfmt quoting for people, JSON objects for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from plumb.logs import ContextFormatter, JsonFormatter, configure_logging


def record(msg: str = "stream opened", **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("plumb.aggregator.ingest", logging.INFO, __file__, 1, msg, None, None)
    rec.__dict__.update(extra)
    rec.created = 1_800_000_000.25  # 2027-01-15T08:00:00.250Z
    return rec


def text(rec: logging.LogRecord) -> str:
    return ContextFormatter("%(levelname)s %(name)s: %(message)s").format(rec)


def test_text_leaves_plain_values_bare():
    assert text(record(node="gpu-node-7", gpus=8)) == (
        "INFO plumb.aggregator.ingest: stream opened node=gpu-node-7 gpus=8"
    )


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("NVIDIA H100 80GB HBM3", '"NVIDIA H100 80GB HBM3"'),
        ("a=b", '"a=b"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("", '""'),
    ],
    ids=["space", "equals", "quote", "empty"],
)
def test_text_quotes_values_a_logfmt_reader_would_split(value, written):
    assert text(record(gpu_name=value)).endswith(f" gpu_name={written}")


def test_json_is_one_object_a_line_with_fixed_keys_and_context():
    line = JsonFormatter().format(record(node="gpu node 7", gpus=8))
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2027-01-15T08:00:00.250Z",
        "level": "INFO",
        "logger": "plumb.aggregator.ingest",
        "message": "stream opened",
        "node": "gpu node 7",
        "gpus": 8,
    }


def test_json_context_never_replaces_the_fixed_keys():
    entry = json.loads(JsonFormatter().format(record(level="forged", time="then")))
    assert (entry["level"], entry["time"]) == ("INFO", "2027-01-15T08:00:00.250Z")


def test_json_writes_what_it_cannot_encode_as_text_and_keeps_the_traceback():
    try:
        raise ValueError("bad frame")
    except ValueError:
        rec = record("stream failed", peer=("10.0.0.7", 41000), path=object)
        rec.exc_info = sys.exc_info()
    entry = json.loads(JsonFormatter().format(rec))
    assert entry["peer"] == ["10.0.0.7", 41000]
    assert entry["path"] == "<class 'object'>"
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert entry["exception"].endswith("ValueError: bad frame")


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, restored after the test reconfigures it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    root.handlers[:], root.level = handlers, level


@pytest.mark.parametrize(("fmt", "kind"), [("json", JsonFormatter), ("text", ContextFormatter)])
def test_configure_logging_picks_the_formatter(root_logger, fmt, kind):
    configure_logging("warning", fmt)
    (handler,) = root_logger.handlers
    assert type(handler.formatter) is kind
    assert root_logger.level == logging.WARNING


def test_agent_log_format_comes_from_the_flag_over_the_env(monkeypatch):
    from plumb.agent.main import build_settings, parse_args

    monkeypatch.setenv("PLUMB_LOG_FORMAT", "json")
    assert build_settings(parse_args([])).log_format == "json"
    assert build_settings(parse_args(["--log-format", "text"])).log_format == "text"


def test_agent_refuses_an_unknown_log_format(capsys):
    from plumb.agent.main import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--log-format", "xml"])
    assert exit_.value.code == 2
    assert "invalid choice: 'xml' (choose from 'text', 'json')" in capsys.readouterr().err


def test_plumb_serve_refuses_an_unknown_log_format():
    from typer.testing import CliRunner

    from plumb.aggregator.cli import app

    result = CliRunner().invoke(app, ["serve", "--log-format", "xml"])
    assert result.exit_code == 2
    said = " ".join(result.output.replace("│", " ").split())  # unwrap the error box
    assert "'--log-format': Value error, 'xml' is not one of 'text', 'json'" in said


def test_aggregator_log_format_setting_reads_the_env(monkeypatch):
    from plumb.aggregator.settings import AggregatorSettings

    assert AggregatorSettings().log_format == "text"
    monkeypatch.setenv("PLUMB_LOG_FORMAT", "json")
    assert AggregatorSettings().log_format == "json"
