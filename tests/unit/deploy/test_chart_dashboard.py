"""The chart's Grafana dashboard ConfigMap is deploy/grafana/plumb.json, for Grafana's sidecar."""

from __future__ import annotations

import json

from chart_cases import CHART, EMBEDDED, ROOT

SOURCE = ROOT / "deploy" / "grafana" / "plumb.json"
COPY = CHART / "files" / "dashboards" / "plumb.json"


def test_chart_copy_of_the_dashboard_matches_the_source():
    assert COPY.read_bytes() == SOURCE.read_bytes(), (
        f"{COPY.relative_to(ROOT)} differs from {SOURCE.relative_to(ROOT)}: "
        f"cp {SOURCE.relative_to(ROOT)} {COPY.relative_to(ROOT)}"
    )


def test_dashboard_config_map_is_labelled_for_grafana_s_sidecar(render, find_object):
    cm = find_object(render({"grafanaDashboard": {"enabled": True}}), "ConfigMap")
    # kube-prometheus-stack's and the grafana chart's sidecar default: label grafana_dashboard=1.
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "plumb"
    assert json.loads(cm["data"]["plumb.json"]) == json.loads(SOURCE.read_text())


def test_dashboard_goes_where_the_sidecar_looks(render, find_object):
    cm = find_object(render(EMBEDDED), "ConfigMap")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "GPU"}


def test_no_dashboard_unless_asked(render):
    assert not [o for o in render() if o["kind"] == "ConfigMap"]
