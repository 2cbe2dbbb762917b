"""What the chart tests share: where the chart is and the value sets they render it with.

A module with a unique name rather than conftest imports: test directories here have no
__init__.py, so every `conftest` is the same module name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "plumb"
MONITORING_APIS = (
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
)

# Every optional feature on: PostgreSQL, two replicas, a separate validation namespace,
# NetworkPolicy, ServiceMonitor and PrometheusRule (the last two need MONITORING_APIS).
ALL_ON: dict[str, Any] = {
    "networkPolicy": {
        "enabled": True,
        "httpFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
    },
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "aggregator": {
        "replicas": 2,
        "database": {"postgres": {"existingSecret": "plumb-db", "secretKey": "url"}},
        "validationNamespace": "plumb-validation",
        "nodeWrites": True,
        "podAnnotations": {"example.com/team": "gpu"},
    },
    "agent": {"runtimeClassName": "nvidia", "priorityClassName": "system-node-critical"},
    "imagePullSecrets": [{"name": "regcred"}],
}

# SQLite on a PersistentVolumeClaim instead of PostgreSQL.
PERSISTENT: dict[str, Any] = {"aggregator": {"database": {"persistence": {"enabled": True}}}}


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of `kind` (and `name`, if given)."""
    matches = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, got {len(matches)}"
    return matches[0]


# API tokens from a Secret, anonymous read, tight rate limits, and TLS from a cert-manager
# style Secret (tls.crt, tls.key, ca.crt) the agents take their CA from.
SECURED: dict[str, Any] = {
    "serviceMonitor": {"enabled": True},
    "aggregator": {
        "api": {
            "tokensSecret": "plumb-api-tokens",
            "anonymousRead": True,
            "rateLimit": {"perSecond": 5, "burst": 20},
        },
        "tls": {"secret": "plumb-tls"},
    },
}
