"""The Helm chart: lint, schema validation of its output, and the shape issues 7 and 17 ask for."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest
from chart_cases import ALL_ON, CHART, DIGEST, EMBEDDED, OAUTH2_PROXY, PERSISTENT, SECURED
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes.utils.quantity import parse_quantity

from plumb.agent.settings import AgentSettings
from plumb.aggregator.settings import AggregatorSettings

# Env vars the chart sets ahead of the code that reads them.
PENDING_AGENT_ENV: set[str] = set()
PENDING_AGGREGATOR_ENV: set[str] = set()
BUILTIN_GROUPS_SKIPPED = ("monitoring.coreos.com/",)  # CRDs: no schema in kubernetes-validate
# The Kubernetes minors users run (issue 17), and the newest the helm binary is built for.
KUBE_VERSIONS = ("1.29", "1.30", "1.31", "1.32", "1.33", "1.35")
CASES = {
    "defaults": None,
    "all-optional-on": ALL_ON,
    "sqlite-pvc": PERSISTENT,
    "secured": SECURED,
    "embedded": EMBEDDED,
    "oauth2-proxy": OAUTH2_PROXY,
}


def container(objects: list[dict[str, Any]], kind: str, find_object) -> dict[str, Any]:
    return find_object(objects, kind)["spec"]["template"]["spec"]["containers"][0]


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c["env"]}


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_helm_lint_strict_passes(helm, values_file, values):
    args = ["lint", "--strict", str(CHART)]
    if values:
        args += ["-f", str(values_file(values))]
    helm(*args)


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_every_builtin_object_passes_strict_schema_validation(render, values, kube_version):
    objects = render(values, kube_version=f"{kube_version}.0")
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith(BUILTIN_GROUPS_SKIPPED):
            continue
        kubernetes_validate.validate(obj, kube_version, strict=True)
        checked += 1
    assert checked >= 10


def test_all_optional_features_render_every_kind(render):
    kinds = {o["kind"] for o in render(ALL_ON)}
    assert kinds >= {
        "DaemonSet",
        "Deployment",
        "Service",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "PrometheusRule",
    }


def test_monitoring_objects_render_whenever_enabled_without_asking_the_cluster(render):
    # helm template knows no CRDs; an enabled ServiceMonitor must not vanish silently.
    assert {o["kind"] for o in render(ALL_ON)} >= {"ServiceMonitor", "PrometheusRule"}
    assert not {o["kind"] for o in render()} & {"ServiceMonitor", "PrometheusRule", "ConfigMap"}


def test_agent_runs_on_any_gpu_label_or_the_opt_in_label(render, find_object):
    ds = find_object(render(), "DaemonSet")
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    # Separate terms are ORed by the scheduler; one expression each.
    assert [t["matchExpressions"] for t in terms] == [
        [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}],
        [
            {
                "key": "feature.node.kubernetes.io/pci-10de.present",
                "operator": "In",
                "values": ["true"],
            }
        ],
        [{"key": "plumb.dev/agent", "operator": "In", "values": ["true"]}],
    ]


def test_agent_tolerates_every_noschedule_taint_at_node_critical_priority(render, find_object):
    # As the NVIDIA device plugin and dcgm-exporter: no key, so every NoSchedule taint.
    pod = find_object(render(), "DaemonSet")["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists", "effect": "NoSchedule"}]
    assert pod["priorityClassName"] == "system-node-critical"


def test_agent_requests_no_gpu(render, find_object):
    pod = find_object(render(), "DaemonSet")["spec"]["template"]["spec"]
    resources = pod["containers"][0]["resources"]
    for section in resources.values():
        assert not any(k.startswith("nvidia.com/") for k in section)


def test_agent_is_hardened_and_sees_the_host_read_only(render, find_object):
    objects = render()
    pod = find_object(objects, "DaemonSet")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["command"] == ["plumb-agent"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in sc
    host_volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert set(host_volumes.values()) >= {"/etc", "/proc", "/sys", "/usr"}
    for mount in c["volumeMounts"]:
        if mount["name"] in host_volumes:
            assert mount["readOnly"] is True
            assert mount["mountPath"] == "/host" + host_volumes[mount["name"]]
    assert env_of(c)["PLUMB_HOST_ROOT"]["value"] == "/host"


def test_agent_env_maps_onto_its_settings(render, find_object):
    c = container(render(), "DaemonSet", find_object)
    env = env_of(c)
    assert env["PLUMB_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # The agents' own Service, whose endpoints include aggregator pods not yet ready.
    assert env["PLUMB_AGGREGATOR"]["value"] == "plumb-aggregator-agents.plumb.svc:7443"
    fields = {f"PLUMB_{name.upper()}" for name in AgentSettings.model_fields}
    plumb_env = {name for name in env if name.startswith("PLUMB_")}
    assert plumb_env - PENDING_AGENT_ENV <= fields
    settings = AgentSettings(
        aggregator=env["PLUMB_AGGREGATOR"]["value"], host_root=env["PLUMB_HOST_ROOT"]["value"]
    )
    assert str(settings.host_root) == "/host"


def test_agent_identity_is_only_a_projected_token_for_the_plumb_audience(render, find_object):
    objects = render()
    pod = find_object(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    sa = find_object(objects, "ServiceAccount", "plumb-agent")
    assert sa["automountServiceAccountToken"] is False
    sources = [v for v in pod["volumes"] if "projected" in v][0]["projected"]["sources"]
    assert sources == [
        {"serviceAccountToken": {"audience": "plumb", "expirationSeconds": 3600, "path": "token"}}
    ]
    # Nothing grants the agent's ServiceAccount any API access.
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert all(s["name"] != "plumb-agent" for s in binding["subjects"])


def test_aggregator_probes_ports_and_service(render, find_object):
    objects = render()
    c = container(objects, "Deployment", find_object)
    assert c["command"] == ["plumb", "serve"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    svc = find_object(objects, "Service", "plumb-aggregator")
    assert {(p["name"], p["port"]) for p in svc["spec"]["ports"]} == {
        ("grpc", 7443),
        ("http", 8080),
    }
    assert not svc["spec"].get("publishNotReadyAddresses")  # people and Prometheus: ready only
    env = env_of(c)
    assert env["PLUMB_GRPC_LISTEN"]["value"] == "0.0.0.0:7443"
    assert env["PLUMB_HTTP_LISTEN"]["value"] == "0.0.0.0:8080"
    fields = {f"PLUMB_{name.upper()}" for name in AggregatorSettings.model_fields}
    top_level = {n.split("__")[0] for n in env if n.startswith("PLUMB_")}  # PLUMB_AUTH__MODE
    assert top_level - PENDING_AGGREGATOR_ENV <= fields
    assert env["PLUMB_AUTH__MODE"]["value"] == "kubernetes"
    # Tokens count only for pods of the release's own agent DaemonSet.
    assert env["PLUMB_AUTH__AGENT_NAMESPACE"]["value"] == "plumb"
    assert env["PLUMB_AUTH__AGENT_SERVICE_ACCOUNT"]["value"] == "plumb-agent"
    assert env["PLUMB_AUTH__AGENT_DAEMONSET"]["value"] == "plumb-agent"


def test_agents_dial_a_service_that_reaches_the_aggregator_before_it_is_ready(render, find_object):
    # /readyz waits for every stored node to be evaluated after a restart; the gRPC port is
    # open and holding streams long before. The agents' Service routes to it meanwhile.
    objects = render()
    svc = find_object(objects, "Service", "plumb-aggregator-agents")
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
        ("grpc", 7443, "grpc")
    ]
    pod_labels = find_object(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    env = env_of(container(objects, "DaemonSet", find_object))
    assert env["PLUMB_AGGREGATOR"]["value"] == "plumb-aggregator-agents.plumb.svc:7443"
    # The certificate names the main Service, as before: the agents check that name.
    assert env["PLUMB_TLS_SERVER_NAME"]["value"] == "plumb-aggregator.plumb.svc"


def test_the_default_memory_limit_holds_10000_nodes_at_their_measured_peak(render, find_object):
    # bench/results/fleet_10000_r51_size.json: peak RSS 1,055 MiB at 10,000 dgx-h100 nodes
    # (chart README, "Sizing"). Killed for memory, the aggregator would be killed again at
    # each restart's restore.
    resources = container(render(), "Deployment", find_object)["resources"]
    assert parse_quantity(resources["limits"]["memory"]) >= 1.5 * 1055 * 2**20


def test_aggregator_database_sqlite_emptydir_by_default(render, find_object):
    objects = render()
    dep = find_object(objects, "Deployment")
    assert env_of(container(objects, "Deployment", find_object))["PLUMB_DB"]["value"] == (
        "sqlite:////data/plumb.db"
    )
    data = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "data"][0]
    assert "emptyDir" in data
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]


def test_aggregator_database_sqlite_on_a_pvc(render, find_object):
    objects = render(PERSISTENT)
    pvc = find_object(objects, "PersistentVolumeClaim")
    dep = find_object(objects, "Deployment")
    data = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "data"][0]
    assert data["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


def test_aggregator_database_postgres_url_from_secret(render, find_object):
    objects = render(ALL_ON)
    env = env_of(container(objects, "Deployment", find_object))
    assert env["PLUMB_DB"]["valueFrom"] == {"secretKeyRef": {"name": "plumb-db", "key": "url"}}
    assert find_object(objects, "Deployment")["spec"]["replicas"] == 2


def test_several_replicas_on_sqlite_are_refused(helm, values_file):
    result = helm(
        "template",
        "plumb",
        str(CHART),
        "-f",
        str(values_file({"aggregator": {"replicas": 2}})),
        check=False,
    )
    assert result.returncode != 0
    assert "SQLite has one writer" in result.stderr


@pytest.mark.parametrize(
    "bad",
    [
        {"logLevel": "LOUD"},
        {"agent": {"hostRoot": "relative"}},
        {"agent": {"token": {"audience": "", "expirationSeconds": 3600}}},
        {"aggregator": {"grpcPort": 0}},
        {"aggregator": {"api": {"rateLimit": {"perSecond": 0}}}},
        {"aggregator": {"api": {"anonymousRead": "yes"}}},
        {"unknownKey": 1},
    ],
    ids=["log-level", "host-root", "audience", "port", "rate", "anonymous", "unknown-key"],
)
def test_schema_rejects_bad_values(helm, values_file, bad):
    result = helm("template", "plumb", str(CHART), "-f", str(values_file(bad)), check=False)
    assert result.returncode != 0
    assert "schema" in result.stderr


def test_aggregator_rbac_is_least_privilege(render, find_object):
    objects = render(ALL_ON)
    cluster = find_object(objects, "ClusterRole")["rules"]
    granted = {
        (group, resource, verb)
        for rule in cluster
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "nodes", "patch"),
        ("", "nodes/status", "patch"),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("apps", "daemonsets", "list"),
    } <= granted
    # Pods are read only where agents and validation Jobs run, never cluster-wide.
    assert not {r for _, r, _ in granted} & {"pods", "secrets", "configmaps", "*"}
    assert not {v for _, _, v in granted} & {"delete", "deletecollection", "*", "escalate"}
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Role"}
    leases = roles["plumb-aggregator-leases"]
    assert leases["metadata"]["namespace"] == "plumb"
    assert leases["rules"][0]["resources"] == ["leases"]
    jobs = roles["plumb-aggregator-validation"]
    assert jobs["metadata"]["namespace"] == "plumb-validation"
    assert jobs["rules"][0]["resources"] == ["jobs"]
    # Bare pods (gang-scheduling, dra-support), their PodGroup and ResourceClaim: in the
    # validation namespace only, never patched or listed elsewhere.
    pods = {"resources": ["pods"], "verbs": ["list", "get", "create", "delete"], "apiGroups": [""]}
    assert pods in jobs["rules"]
    for group, resource in (
        ("scheduling.run.ai", "podgroups"),
        ("resource.k8s.io", "resourceclaims"),
    ):
        rule = {"apiGroups": [group], "resources": [resource], "verbs": ["get", "create", "delete"]}
        assert rule in jobs["rules"]
    agents = roles["plumb-aggregator-agents"]
    assert agents["metadata"]["namespace"] == "plumb"
    assert agents["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]


@pytest.mark.parametrize("values", [None, ALL_ON], ids=["default", "all-on"])
def test_network_policy_admits_grpc_only_from_agents(render, find_object, values):
    objects = render(values)  # on by default (issue 16, row 3)
    policy = find_object(objects, "NetworkPolicy", "plumb-aggregator")
    grpc_rule = [r for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == "grpc"][0]
    assert grpc_rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "plumb",
                    "app.kubernetes.io/instance": "plumb",
                    "app.kubernetes.io/component": "agent",
                }
            }
        }
    ]
    agent = find_object(objects, "NetworkPolicy", "plumb-agent")
    assert agent["spec"]["policyTypes"] == ["Ingress"]
    assert "ingress" not in agent["spec"]


def test_network_policy_can_be_turned_off(render):
    objects = render({"networkPolicy": {"enabled": False}})
    assert not [o for o in objects if o["kind"] == "NetworkPolicy"]


def test_pdb_uses_policy_v1(render, find_object):
    pdb = find_object(render(), "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["maxUnavailable"] == 1


def test_pdb_left_out_where_policy_v1_is_not_served(render):
    # Kubernetes 1.20 serves only policy/v1beta1, which is gone from current clusters.
    assert not [o for o in render(kube_version="1.20.2") if o["kind"] == "PodDisruptionBudget"]
    explicit = render(kube_version="1.20.2", api_versions=["policy/v1/PodDisruptionBudget"])
    assert [o for o in explicit if o["kind"] == "PodDisruptionBudget"]


def _settings_from(env: dict[str, dict[str, Any]], monkeypatch) -> AggregatorSettings:
    """The aggregator's settings as the rendered env gives them."""
    for name, entry in env.items():
        if name.startswith("PLUMB_") and "value" in entry:
            monkeypatch.setenv(name, entry["value"])
    return AggregatorSettings()


def _mounted_items(pod: dict[str, Any], c: dict[str, Any], path: str) -> tuple[str, list]:
    """The Secret behind the mount at `path`, and the keys it projects."""
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == path]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return volume["secret"]["secretName"], volume["secret"]["items"]


def test_api_tokens_and_tls_come_from_secrets(render, find_object, monkeypatch):
    objects = render(SECURED)
    deployment = find_object(objects, "Deployment")["spec"]["template"]["spec"]
    agg = deployment["containers"][0]
    settings = _settings_from(env_of(agg), monkeypatch)
    assert settings.api.anonymous_read is True and settings.api.public_metrics is True
    assert (settings.api.rate_per_s, settings.api.burst) == (5.0, 20)
    assert str(settings.api.tokens_file) == "/etc/plumb/api/tokens"
    assert _mounted_items(deployment, agg, "/etc/plumb/api") == (
        "plumb-api-tokens",
        [{"key": "tokens", "path": "tokens"}],
    )
    assert (str(settings.tls.cert_file), str(settings.tls.key_file)) == (
        "/etc/plumb/tls/tls.crt",
        "/etc/plumb/tls/tls.key",
    )
    name, items = _mounted_items(deployment, agg, "/etc/plumb/tls")
    assert name == "plumb-tls" and {i["key"] for i in items} == {"tls.crt", "tls.key"}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert agg[probe]["httpGet"]["scheme"] == "HTTPS"

    daemonset = find_object(objects, "DaemonSet")["spec"]["template"]["spec"]
    agent = daemonset["containers"][0]
    assert env_of(agent)["PLUMB_CA_FILE"]["value"] == "/etc/plumb/ca/ca.crt"
    # The agents get the CA only, never the aggregator's private key.
    assert _mounted_items(daemonset, agent, "/etc/plumb/ca") == (
        "plumb-tls",
        [{"key": "ca.crt", "path": "ca.crt"}],
    )
    endpoint = find_object(objects, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["serverName"] == "plumb-aggregator.plumb.svc"


def test_by_default_the_api_has_no_anonymous_read_and_both_listeners_use_tls(
    render, find_object, monkeypatch
):
    objects = render()
    agg = container(objects, "Deployment", find_object)
    settings = _settings_from(env_of(agg), monkeypatch)
    assert settings.api.anonymous_read is False and settings.api.tokens_file is None
    assert settings.tls.enabled
    assert agg["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    agent = container(objects, "DaemonSet", find_object)
    assert env_of(agent)["PLUMB_CA_FILE"]["value"] == "/etc/plumb/ca/ca.crt"


def test_the_generated_certificate_is_signed_by_its_ca_and_names_the_service(render, find_object):
    secret = next(o for o in render() if o["kind"] == "Secret" and o["type"] == "kubernetes.io/tls")
    assert secret["metadata"]["name"] == "plumb-aggregator-tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # The name the agents expect (agent-daemonset.yaml: PLUMB_TLS_SERVER_NAME).
    assert "plumb-aggregator.plumb.svc" in names.get_values_for_type(x509.DNSName)
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)  # raises unless the CA's key signed it
    serialization.load_pem_private_key(data["tls.key"], password=None)


def test_without_a_secret_or_generation_the_listeners_are_plaintext(
    render, find_object, monkeypatch
):
    objects = render({"aggregator": {"tls": {"generate": False}}})
    agg = container(objects, "Deployment", find_object)
    assert not _settings_from(env_of(agg), monkeypatch).tls.enabled
    assert agg["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    agent_env = env_of(container(objects, "DaemonSet", find_object))
    assert "PLUMB_CA_FILE" not in agent_env and "PLUMB_TLS_SERVER_NAME" not in agent_env
    assert not [o for o in objects if o["kind"] == "Secret"]


def cluster_grants(objects: list[dict[str, Any]], find_object) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in find_object(objects, "ClusterRole")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_aggregator_may_patch_nodes_only_with_node_writes(render, find_object):
    granted = cluster_grants(render(), find_object)
    assert {("", "nodes", "get"), ("", "nodes", "list"), ("", "nodes", "watch")} <= granted
    assert not {(r, v) for _, r, v in granted if r.startswith("nodes") and v != "get"} - {
        ("nodes", "list"),
        ("nodes", "watch"),
    }
    written = cluster_grants(render({"aggregator": {"nodeWrites": True}}), find_object)
    assert written - granted == {("", "nodes", "patch"), ("", "nodes/status", "patch")}
    cordons = cluster_grants(render({"aggregator": {"cordon": {"enabled": True}}}), find_object)
    assert cordons - granted == {("", "nodes", "patch")}


def test_cordons_are_off_by_default_and_the_chart_passes_them_on(render, find_object):
    def env(values=None):
        (container,) = pod_of(render(values), "Deployment", find_object)["spec"]["containers"]
        return {e["name"]: e.get("value") for e in container["env"]}

    assert env()["PLUMB_REMEDIATION__CORDON"] == "false"
    on = env({"aggregator": {"cordon": {"enabled": True, "maxCordonedFraction": 0.25}}})
    assert (on["PLUMB_REMEDIATION__CORDON"], on["PLUMB_REMEDIATION__MAX_CORDONED_FRACTION"]) == (
        "true",
        "0.25",
    )


def pod_of(objects: list[dict[str, Any]], kind: str, find_object) -> dict[str, Any]:
    return find_object(objects, kind)["spec"]["template"]


def test_pod_templates_carry_the_selector_labels_once_and_win_over_pod_labels(render, find_object):
    objects = render(EMBEDDED)
    for kind, component in (("DaemonSet", "agent"), ("Deployment", "aggregator")):
        workload = find_object(objects, kind)
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert workload["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "plumb",
            "app.kubernetes.io/instance": "plumb",
            "app.kubernetes.io/component": component,
        }
        assert labels.items() >= workload["spec"]["selector"]["matchLabels"].items()
        assert (labels["cost-center"], labels["team"]) == ("ml", "gpu-platform")
        assert "helm.sh/chart" not in labels  # a chart bump alone restarts no pod


def test_common_labels_reach_every_object_but_never_the_chart_s_own(render):
    objects = render(EMBEDDED)
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["team"] == "gpu-platform", obj["kind"]
        assert labels["app.kubernetes.io/name"] == "plumb", obj["kind"]


def test_agent_takes_the_scheduling_values_of_the_gpu_operator_charts(render, find_object):
    pod = pod_of(render(EMBEDDED), "DaemonSet", find_object)
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"node-role.example.com/gpu": "true"}
    assert spec["tolerations"] == [{"key": "example.com/dedicated", "operator": "Exists"}]
    assert spec["priorityClassName"] == "gpu-critical"
    # The user's affinity adds to the GPU node affinity, which stays.
    affinity = spec["affinity"]
    assert affinity["podAntiAffinity"] == EMBEDDED["agent"]["affinity"]["podAntiAffinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms["nodeSelectorTerms"]) == 3
    assert pod["metadata"]["annotations"] == {"example.com/scrape": "false"}


def test_agent_node_affinity_of_its_own_replaces_the_gpu_labels(render, find_object):
    mine = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
            ]
        }
    }
    values = {"agent": {"affinity": {"nodeAffinity": mine}}}
    spec = pod_of(render(values), "DaemonSet", find_object)["spec"]
    assert spec["affinity"] == {"nodeAffinity": mine}


@pytest.mark.parametrize(
    ("kind", "component"), [("DaemonSet", "agent"), ("Deployment", "aggregator")]
)
def test_extra_env_volumes_and_security_contexts_reach_the_pod(
    render, find_object, kind, component
):
    objects = render(EMBEDDED)
    values = EMBEDDED[component]
    spec = pod_of(objects, kind, find_object)["spec"]
    c = spec["containers"][0]
    assert c["env"][-len(values["extraEnv"]) :] == values["extraEnv"]
    assert c["volumeMounts"][-1] == values["extraVolumeMounts"][0]
    assert spec["volumes"][-1] == values["extraVolumes"][0]
    # Set keys change; the chart's other hardening stays.
    assert spec["securityContext"].items() >= values["podSecurityContext"].items()
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"].items() >= values["securityContext"].items()
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["image"] == f"ghcr.io/plumb-dev/plumb-{component}@{DIGEST}"
    assert spec["imagePullSecrets"] == [{"name": "umbrella-pull"}, {"name": "regcred"}]
    assert env_of(c)["PLUMB_LOG_FORMAT"]["value"] == "text"


def images(objects: list[dict[str, Any]], find_object) -> dict[str, tuple[str, str]]:
    """Each component's (image, imagePullPolicy)."""
    return {
        component: (c["image"], c["imagePullPolicy"])
        for component, kind in (("agent", "DaemonSet"), ("aggregator", "Deployment"))
        for c in [container(objects, kind, find_object)]
    }


def test_each_component_runs_its_own_image_at_the_chart_version(render, find_object):
    # Chart.yaml appVersion is 0.1.0; the Dockerfile's two targets are the two images.
    assert images(render(), find_object) == {
        "agent": ("ghcr.io/plumb-dev/plumb-agent:0.1.0", "IfNotPresent"),
        "aggregator": ("ghcr.io/plumb-dev/plumb-aggregator:0.1.0", "IfNotPresent"),
    }


def test_the_shared_image_values_are_defaults_each_component_overrides(render, find_object):
    values = {
        "image": {"tag": "0.2.0", "pullPolicy": "Always"},
        "agent": {"image": {"repository": "registry.example/plumb-agent", "tag": "0.2.1"}},
        "aggregator": {"image": {"repository": "registry.example/agg", "pullPolicy": "Never"}},
    }
    assert images(render(values), find_object) == {
        "agent": ("registry.example/plumb-agent:0.2.1", "Always"),
        "aggregator": ("registry.example/agg:0.2.0", "Never"),
    }


def test_a_set_image_repository_is_the_one_image_of_both_as_before(render, find_object):
    digest = "sha256:" + "fedcba9876543210" * 4
    values = {"image": {"repository": "registry.example/plumb", "digest": digest}}
    assert images(render(values), find_object) == {
        "agent": (f"registry.example/plumb@{digest}", "IfNotPresent"),
        "aggregator": (f"registry.example/plumb@{digest}", "IfNotPresent"),
    }


def test_both_processes_log_json_by_default(render, find_object, monkeypatch):
    objects = render()
    agent_env = env_of(container(objects, "DaemonSet", find_object))
    assert agent_env["PLUMB_LOG_FORMAT"]["value"] == "json"
    aggregator_env = env_of(container(objects, "Deployment", find_object))
    assert _settings_from(aggregator_env, monkeypatch).log_format == "json"


def test_service_monitor_takes_relabelings_and_scrape_options(render, find_object):
    endpoint = find_object(render(EMBEDDED), "ServiceMonitor")["spec"]["endpoints"][0]
    monitor = EMBEDDED["serviceMonitor"]
    assert endpoint["interval"] == "15s"
    assert endpoint["scrapeTimeout"] == "10s"
    assert endpoint["honorLabels"] is True
    assert endpoint["relabelings"] == monitor["relabelings"]
    assert endpoint["metricRelabelings"] == monitor["metricRelabelings"]
    plain = find_object(render(ALL_ON), "ServiceMonitor")["spec"]["endpoints"][0]
    assert "scrapeTimeout" not in plain and plain["honorLabels"] is False


@pytest.mark.parametrize(
    "bad",
    [
        {"logFormat": "xml"},
        {"image": {"digest": "latest"}},
        {"image": {"digest": DIGEST}},
        {"agent": {"image": {"repository": "x", "digest": "latest"}}},
        {"aggregator": {"image": {"repository": "x", "tag": "has space"}}},
        {"aggregator": {"image": {"repository": "", "tag": "1"}}},
        {"commonLabels": {"team": "has spaces"}},
        {"agent": {"podLabels": {"bad key!": "x"}}},
        {"agent": {"extraEnv": [{"value": "no name"}]}},
        {"agent": {"extraVolumeMounts": [{"name": "x"}]}},
        {"serviceMonitor": {"scrapeTimeout": "ten seconds"}},
        {"grafanaDashboard": {"labels": {"grafana_dashboard": 1}}},
    ],
    ids=[
        "log-format",
        "digest",
        "digest-of-no-repository",
        "agent-digest",
        "aggregator-tag",
        "aggregator-repository",
        "label-value",
        "label-key",
        "env",
        "mount",
        "timeout",
        "dash",
    ],
)
def test_schema_rejects_bad_embedding_values(helm, values_file, bad):
    result = helm("template", "plumb", str(CHART), "-f", str(values_file(bad)), check=False)
    assert result.returncode != 0
    assert "schema" in result.stderr


def test_the_sensor_gauges_are_a_second_endpoint_on_their_own_interval(render, find_object):
    endpoints = find_object(render(ALL_ON), "ServiceMonitor")["spec"]["endpoints"]
    assert [(e["path"], e["interval"]) for e in endpoints] == [
        ("/metrics", "30s"),
        ("/metrics/sensors", "30s"),
    ]
    off = {**ALL_ON, "serviceMonitor": {**ALL_ON["serviceMonitor"], "sensors": {"enabled": False}}}
    endpoints = find_object(render(off), "ServiceMonitor")["spec"]["endpoints"]
    assert [e["path"] for e in endpoints] == ["/metrics"]
