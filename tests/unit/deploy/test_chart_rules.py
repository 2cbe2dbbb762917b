"""The chart's PrometheusRule is deploy/prometheus/rules.yml, never a diverging copy."""

from __future__ import annotations

import subprocess

import yaml
from chart_cases import ALL_ON, CHART, ROOT

SOURCE = ROOT / "deploy" / "prometheus" / "rules.yml"
COPY = CHART / "files" / "rules.yml"


def test_chart_copy_of_the_rules_matches_the_source():
    assert COPY.read_bytes() == SOURCE.read_bytes(), (
        f"{COPY.relative_to(ROOT)} differs from {SOURCE.relative_to(ROOT)}: "
        "run scripts/sync-chart-rules.sh"
    )


def test_rules_file_is_a_prometheus_rule_file():
    rules = yaml.safe_load(SOURCE.read_text())
    assert rules["groups"]
    for group in rules["groups"]:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert ("alert" in rule) != ("record" in rule)
            assert rule["expr"]


def test_prometheus_rule_spec_is_the_rules_file(render, find_object):
    rule = find_object(render(ALL_ON), "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(SOURCE.read_text())["groups"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"


def test_sync_script_check_mode_agrees():
    result = subprocess.run(
        [str(ROOT / "scripts" / "sync-chart-rules.sh"), "--check"], capture_output=True
    )
    assert result.returncode == 0, result.stderr
