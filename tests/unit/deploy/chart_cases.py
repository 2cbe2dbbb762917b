"""What the chart tests share: where the chart is and the value sets they render it with.

A module with a unique name rather than conftest imports: test directories here have no
__init__.py, so every `conftest` is the same module name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "plumb"

# Every optional feature on: PostgreSQL, two replicas, a separate validation namespace,
# NetworkPolicy, ServiceMonitor and PrometheusRule.
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
        "cordon": {"enabled": True, "maxCordonedFraction": 0.2},
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


# The Ingress in front of oauth2-proxy, as docs/security.md shows it: ingress-nginx asks
# oauth2-proxy about each request and passes the user on; the aggregator believes the header
# only from the controller's pod network.
OAUTH2_PROXY: dict[str, Any] = {
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "annotations": {
            "nginx.ingress.kubernetes.io/backend-protocol": "HTTPS",
            "nginx.ingress.kubernetes.io/auth-url": (
                "http://oauth2-proxy.auth.svc.cluster.local/oauth2/auth"
            ),
            "nginx.ingress.kubernetes.io/auth-signin": (
                "https://$host/oauth2/start?rd=$escaped_request_uri"
            ),
            "nginx.ingress.kubernetes.io/auth-response-headers": "X-Auth-Request-User",
        },
        "hosts": [{"host": "plumb.example.com", "paths": [{"path": "/", "pathType": "Prefix"}]}],
        "tls": [{"secretName": "plumb-ingress-tls", "hosts": ["plumb.example.com"]}],
    },
    "aggregator": {
        "extraEnv": [
            {"name": "PLUMB_API__AUTH_PROXY_HEADER", "value": "X-Auth-Request-User"},
            {"name": "PLUMB_API__TRUSTED_PROXIES", "value": '["10.0.0.0/8"]'},
        ],
    },
}


DIGEST = "sha256:" + "0123456789abcdef" * 4

# Every value an embedding chart sets on the pods, as the GPU Operator's and dcgm-exporter's
# charts take them, plus the ServiceMonitor's scrape options and the Grafana dashboard.
EMBEDDED: dict[str, Any] = {
    "global": {"imagePullSecrets": ["umbrella-pull"], "storageClass": "fast"},
    "imagePullSecrets": [{"name": "regcred"}],
    "commonLabels": {"team": "gpu-platform", "app.kubernetes.io/name": "ignored"},
    "logFormat": "text",
    "agent": {
        "image": {"repository": "ghcr.io/plumb-dev/plumb-agent", "digest": DIGEST},
        "nodeSelector": {"node-role.example.com/gpu": "true"},
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "other-agent"}},
                        },
                    }
                ]
            }
        },
        "tolerations": [{"key": "example.com/dedicated", "operator": "Exists"}],
        "priorityClassName": "gpu-critical",
        "podLabels": {"cost-center": "ml", "app.kubernetes.io/component": "not-the-agent"},
        "podAnnotations": {"example.com/scrape": "false"},
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}],
        "extraVolumes": [{"name": "extra-ca", "configMap": {"name": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "extra-ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
        "podSecurityContext": {"runAsUser": 1001, "runAsGroup": 1001},
        "securityContext": {"readOnlyRootFilesystem": False},
    },
    "aggregator": {
        "image": {"repository": "ghcr.io/plumb-dev/plumb-aggregator", "digest": DIGEST},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "example.com/infra", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "infra-high",
        "podLabels": {"cost-center": "ml"},
        "extraEnv": [{"name": "PLUMB_STORE__QUEUE_MAX", "value": "5000"}],
        "extraVolumes": [{"name": "scratch", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "podSecurityContext": {"fsGroup": 2000},
        "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
    },
    "serviceMonitor": {
        "enabled": True,
        "interval": "15s",
        "scrapeTimeout": "10s",
        "honorLabels": True,
        "relabelings": [{"targetLabel": "cluster", "replacement": "gpu-east"}],
        "metricRelabelings": [
            {"sourceLabels": ["__name__"], "regex": "plumb_ingest_.*", "action": "drop"}
        ],
    },
    "grafanaDashboard": {
        "enabled": True,
        "namespace": "monitoring",
        "annotations": {"grafana_folder": "GPU"},
    },
}
