"""deploy/prometheus/rules.yml: valid for promtool, covered by its promtool unit tests, and every
alert documented (summary, description, a runbook section that exists, a severity label).

promtool comes from Debian's `prometheus` package. A missing promtool fails these tests rather
than skipping them: CI installs the package (.ci/run), so a skip would hide an untested rule file.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml
from chart_cases import ROOT

RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
RULE_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RUNBOOK_BASE = "https://plumb.dev/docs/runbooks.md#"
REQUIRED_ALERTS = {
    "PlumbStackDrift",
    "PlumbStackDriftWarning",
    "PlumbAgentDown",
    "PlumbMixedDriverVersions",
    "PlumbGpuHealth",
}
SEVERITIES = {"critical", "warning", "info"}


def promtool(*args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail(
            "promtool not found on PATH: install Debian's `prometheus` package "
            "(apt-get install -y --no-install-recommends prometheus); .ci/run does"
        )
    return subprocess.run(
        [binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives headings: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for line in markdown.splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_promtool_check_rules_passes():
    result = promtool("check", "rules", str(RULES.relative_to(ROOT)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass():
    assert RULE_TESTS, "no promtool tests in deploy/prometheus/tests/"
    result = promtool("test", "rules", *(str(p.relative_to(ROOT)) for p in RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout


def test_every_required_alert_exists_once():
    names = [rule["alert"] for rule in alerts()]
    assert REQUIRED_ALERTS <= set(names), REQUIRED_ALERTS - set(names)
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: rule["alert"])
def test_alert_is_documented_and_labelled(rule: dict):
    annotations = rule.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        assert str(annotations.get(key, "")).strip(), f"{rule['alert']} has no {key}"
    severity = rule.get("labels", {}).get("severity")
    assert severity in SEVERITIES or severity == "{{ $labels.severity }}", severity

    url = annotations["runbook_url"]
    assert url.startswith(RUNBOOK_BASE), url
    anchor = url.removeprefix(RUNBOOK_BASE)
    assert anchor == rule["alert"].lower(), f"{url} is not the section for {rule['alert']}"
    assert anchor in github_anchors(RUNBOOKS.read_text()), (
        f"docs/runbooks.md has no section '## {rule['alert']}' (anchor #{anchor})"
    )


def test_every_alert_is_tested_firing_and_not_firing():
    cases = [
        case
        for path in RULE_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]
    names = {rule["alert"] for rule in alerts()}
    firing = {case["alertname"] for case in cases if case.get("exp_alerts")}
    silent = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert not names - firing, f"no promtool test sees these fire: {sorted(names - firing)}"
    assert not names - silent, f"no promtool test sees these stay quiet: {sorted(names - silent)}"


def test_every_recording_rule_is_exercised_by_a_promtool_test():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    records = {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}
    tested = {
        case["expr"]
        for path in RULE_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("promql_expr_test", [])
    }
    assert records <= tested, f"no promql_expr_test for: {sorted(records - tested)}"


def test_runbook_sections_match_the_alerts():
    sections = {
        line.removeprefix("## ").strip()
        for line in RUNBOOKS.read_text().splitlines()
        if line.startswith("## ")
    }
    assert sections == {rule["alert"] for rule in alerts()}


def test_rule_tests_load_the_rules_file():
    """Each promtool test file loads ../rules.yml, not a stale copy of its own."""
    for path in RULE_TESTS:
        assert yaml.safe_load(path.read_text())["rule_files"] == ["../rules.yml"], path
