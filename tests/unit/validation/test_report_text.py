"""Reports stay well-formed whatever text an agent sends: JUnit parses, CTRF round-trips."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st
from junitparser import JUnitXml

from plumb.aggregator.validation import ctrf, junit
from plumb.aggregator.validation.model import CheckResult, PlannedCheck, ValidationRun

# Any text protobuf can carry: every code point but the surrogates.
TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
AT = datetime(2026, 12, 1, tzinfo=UTC)


def _run(node: str, status: str, message: str, remediation: str) -> ValidationRun:
    run = ValidationRun(
        id="0" * 32,
        phases=("conformance",),
        checks=(PlannedCheck("ecc", "conformance", "critical", "agent"),),
        nodes=(node,),
        created_at=AT,
        deadline_s=5,
        finished_at=AT,
    )
    run.results[(node, "ecc")] = CheckResult(
        node,
        "ecc",
        "conformance",
        "critical",
        status,
        message,
        remediation=remediation,  # type: ignore[arg-type]
    )
    return run


def test_a_control_character_in_a_message_is_written_visibly_and_the_xml_parses():
    report = junit(_run("gpu-node-1", "error", "ecc \x01 read \x1b[31m failed\x00", ""))
    error = ET.fromstring(report).find("testsuite/testcase/error")
    assert error is not None
    assert error.get("message") == "ecc \\x01 read \\x1b[31m failed\\x00"


@given(
    node=TEXT,
    status=st.sampled_from(["pass", "fail", "error", "skip", "warn"]),
    message=TEXT,
    remediation=TEXT,
)
def test_junit_parses_and_ctrf_round_trips_for_any_text(node, status, message, remediation):
    run = _run(node, status, message, remediation)
    report = junit(run)
    ET.fromstring(report)
    suites = list(JUnitXml.fromstring(report))
    assert len(suites) == 1 and suites[0].tests == 1
    back = json.loads(json.dumps(ctrf(run), ensure_ascii=False))
    assert back["results"]["tests"][0]["message"] == message
