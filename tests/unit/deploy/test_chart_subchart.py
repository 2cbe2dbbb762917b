"""The chart as a subchart: an umbrella depending on it through file://, with `global` values.

Helm hands every subchart the umbrella's `global`, so a schema that refuses unknown top-level
keys must still take it; values for the subchart sit under its name.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from chart_cases import CHART
from conftest import parse

UMBRELLA_VALUES = {
    # What umbrella charts put in global: keys this chart reads and keys it does not know.
    "global": {"imagePullSecrets": [{"name": "umbrella-pull"}], "clusterName": "gpu-east"},
    "plumb": {
        "commonLabels": {"team": "gpu-platform"},
        "serviceMonitor": {"enabled": True, "relabelings": [{"targetLabel": "cluster"}]},
        "grafanaDashboard": {"enabled": True},
    },
}


@pytest.fixture(scope="module")
def umbrella(
    tmp_path_factory: pytest.TempPathFactory, helm: Callable[..., subprocess.CompletedProcess]
) -> Path:
    """A chart with no templates of its own that depends on plumb and vendors it into charts/."""
    root = tmp_path_factory.mktemp("umbrella") / "gpu-stack"
    root.mkdir()
    chart = {
        "apiVersion": "v2",
        "name": "gpu-stack",
        "version": "1.0.0",
        "description": "A test umbrella chart over plumb",
        "dependencies": [
            {"name": "plumb", "version": "0.1.0", "repository": f"file://{CHART}"},
        ],
    }
    (root / "Chart.yaml").write_text(yaml.safe_dump(chart))
    (root / "values.yaml").write_text(yaml.safe_dump(UMBRELLA_VALUES))
    (root / "templates").mkdir()
    (root / "templates" / "NOTES.txt").write_text("GPU stack {{ .Release.Name }} installed.\n")
    helm("dependency", "update", str(root))
    assert (root / "charts" / "plumb-0.1.0.tgz").is_file()
    return root


def test_umbrella_lints_strict(helm, umbrella):
    helm("lint", "--strict", "--with-subcharts", str(umbrella))


def test_umbrella_renders_plumb_with_its_global_values(helm, umbrella, find_object):
    objects = parse(helm("template", "stack", str(umbrella), "--namespace", "gpu").stdout)
    ds = find_object(objects, "DaemonSet", "stack-plumb-agent")
    pod = ds["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "umbrella-pull"}]
    assert ds["metadata"]["labels"]["team"] == "gpu-platform"
    monitor = find_object(objects, "ServiceMonitor", "stack-plumb-aggregator")
    assert monitor["spec"]["endpoints"][0]["relabelings"] == [{"targetLabel": "cluster"}]
    assert find_object(objects, "ConfigMap")["metadata"]["labels"]["grafana_dashboard"] == "1"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["PLUMB_AGGREGATOR"]["value"] == "stack-plumb-aggregator-agents.gpu.svc:7443"
    assert env["PLUMB_TLS_SERVER_NAME"]["value"] == "stack-plumb-aggregator.gpu.svc"
    for obj in objects:
        if not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, "1.33", strict=True)


def test_umbrella_values_for_plumb_are_still_checked_by_its_schema(helm, umbrella, values_file):
    bad = values_file({"plumb": {"logFormat": "xml"}})
    result = helm("template", "stack", str(umbrella), "-f", str(bad), check=False)
    assert result.returncode != 0
    assert "plumb" in result.stderr and "logFormat" in result.stderr
