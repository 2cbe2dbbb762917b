"""The chart's optional Ingress: off by default, and when on, every host and path goes to the
aggregator Service's HTTP port with the class, annotations and TLS given; the oauth2-proxy
example of docs/security.md gives the aggregator a valid proxy sign-in."""

from __future__ import annotations

import pytest
from chart_cases import CHART, OAUTH2_PROXY

from plumb.aggregator.settings import AggregatorSettings


def test_no_ingress_by_default(render):
    assert not [o for o in render() if o["kind"] == "Ingress"]


def test_the_ingress_routes_every_host_and_path_to_the_http_port(render, find_object):
    values = {
        "ingress": {
            "enabled": True,
            "hosts": [
                {"host": "plumb.example.com", "paths": [{"path": "/"}]},
                {"host": "gpu.example.org", "paths": [{"path": "/v1", "pathType": "Exact"}]},
            ],
        }
    }
    ingress = find_object(render(values), "Ingress")
    assert ingress["metadata"]["name"] == "plumb-aggregator"
    assert ingress["metadata"]["namespace"] == "plumb"
    assert "annotations" not in ingress["metadata"]
    spec = ingress["spec"]
    assert "ingressClassName" not in spec and "tls" not in spec
    backend = {"service": {"name": "plumb-aggregator", "port": {"name": "http"}}}
    assert spec["rules"] == [
        {
            "host": "plumb.example.com",
            "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
        },
        {
            "host": "gpu.example.org",
            "http": {"paths": [{"path": "/v1", "pathType": "Exact", "backend": backend}]},
        },
    ]
    service = find_object(render(values), "Service", "plumb-aggregator")
    assert "http" in {p["name"] for p in service["spec"]["ports"]}


def test_the_oauth2_proxy_example_renders_and_configures_the_proxy_sign_in(
    render, find_object, monkeypatch
):
    objects = render(OAUTH2_PROXY)
    ingress = find_object(objects, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [
        {"secretName": "plumb-ingress-tls", "hosts": ["plumb.example.com"]}
    ]
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/auth-response-headers"] == (
        "X-Auth-Request-User"
    )
    assert annotations["nginx.ingress.kubernetes.io/backend-protocol"] == "HTTPS"
    deployment = find_object(objects, "Deployment")
    for entry in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
        if entry["name"].startswith("PLUMB_") and "value" in entry:
            monkeypatch.setenv(entry["name"], entry["value"])
    api = AggregatorSettings().api
    assert api.auth_proxy_header == "X-Auth-Request-User" and api.auth_proxy_scope == "read"
    assert api.trusted_proxies == ["10.0.0.0/8"]


def test_an_ingress_without_hosts_is_refused(helm, values_file):
    values = values_file({"ingress": {"enabled": True, "hosts": []}})
    result = helm("template", "plumb", str(CHART), "-f", str(values), check=False)
    assert result.returncode != 0 and "ingress.hosts" in result.stderr


@pytest.mark.parametrize(
    "bad",
    [
        {"ingress": {"enabled": "yes"}},
        {"ingress": {"hosts": [{"host": "", "paths": [{"path": "/"}]}]}},
        {"ingress": {"hosts": [{"host": "a.example", "paths": [{"path": "no-slash"}]}]}},
        {
            "ingress": {
                "hosts": [{"host": "a.example", "paths": [{"path": "/", "pathType": "Any"}]}]
            }
        },
        {"ingress": {"tls": [{"secret": "x"}]}},
        {"ingress": {"annotations": {"a": 1}}},
    ],
    ids=["enabled", "empty-host", "path", "path-type", "tls-key", "annotation"],
)
def test_schema_rejects_bad_ingress_values(helm, values_file, bad):
    result = helm("template", "plumb", str(CHART), "-f", str(values_file(bad)), check=False)
    assert result.returncode != 0 and "schema" in result.stderr
