"""A real Kubernetes control plane on loopback for the k8s tests, once per run.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler (1.20, built from Debian's
source by scripts/build-k8s-control-plane.sh and cached outside the repo) start on free
loopback ports and stop by the PIDs recorded here. There is no kubelet: tests create Nodes
themselves and play the kubelet by patching pod status. When the binaries are not built the
tests skip and name the script; CI builds them first, so there they run.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import TRANSIENT, Aggregator, free_port
from conftest import until as _until
from helm_fixture import helm_path
from kubernetes import client, config

from plumb.aggregator.k8s import AgentWorkload

ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = "scripts/build-k8s-control-plane.sh"
BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ADMIN_TOKEN = "plumb-test-admin-token"
# The issuer and audience the API server accepts by default; agent tokens use "plumb".
ISSUER = "https://kubernetes.default.svc"
START_TIMEOUT_S = 60.0


def until(check: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> object:
    """The integration tests' `until`, tolerating the API server's transient errors too."""
    return _until(
        check, timeout, what, transient=(*TRANSIENT, client.ApiException, IndexError, OSError)
    )


def node_labels(node: client.V1Node) -> dict[str, str]:
    """A Node's labels: the API server returns a Node without any as None, not an empty map."""
    return node.metadata.labels or {}


@contextmanager
def cluster_aggregators(
    workdir: Path, kubeconfig: Path, namespace: str, env: dict[str, str]
) -> Iterator[Callable[..., Aggregator]]:
    """`start(replica, lease=replica, **env)`: a `plumb serve` on the test cluster with its
    own SQLite file, competing for `lease`; every one started is stopped on exit."""
    started: list[Aggregator] = []

    def start(replica: str, lease: str | None = None, **extra: str) -> Aggregator:
        (workdir / replica).mkdir()
        agg = Aggregator(
            workdir / replica,
            extra_env={
                "PLUMB_AUTH__KUBECONFIG": str(kubeconfig),
                "PLUMB_NAMESPACE": namespace,
                "PLUMB_REPLICA__NAME": replica,
                "PLUMB_KUBERNETES__LEASE_NAME": lease or replica,
                **env,
                **extra,
            },
            start_timeout_s=START_TIMEOUT_S,  # a busy CI machine: imports alone take seconds
        )
        started.append(agg.start())
        return agg

    try:
        yield start
    finally:
        for agg in started:
            if agg.proc is not None and agg.proc.poll() is None:
                agg.stop()


def find_binaries() -> Path | None:
    """PLUMB_K8S_BIN, else the newest complete build in the cache the build script fills."""
    explicit = os.environ.get("PLUMB_K8S_BIN")
    candidates = [Path(explicit)] if explicit else []
    cache = Path(os.environ.get("PLUMB_CACHE", Path.home() / ".cache" / "plumb")) / "k8s"
    if cache.is_dir():
        candidates += sorted((p for p in cache.iterdir() if p.is_dir()), reverse=True)
    for directory in candidates:
        if all(os.access(directory / b, os.X_OK) for b in BINARIES):
            return directory
    return None


@dataclass
class ControlPlane:
    """The running processes, the kubeconfig that reaches them and an admin client."""

    workdir: Path
    bin_dir: Path
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    apiserver_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "certs" / "apiserver.crt"

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True
        )
        (self.workdir / f"{name}.pid").write_text(str(self.procs[name].pid))

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")

    def _readyz(self) -> bool:
        self._check_alive()
        if not self.ca_file.exists():
            return False
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    def _wait(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what} not ready after {START_TIMEOUT_S} s; logs in {self.workdir}"
                )
            time.sleep(0.1)

    def start(self) -> ControlPlane:
        wd = self.workdir
        subprocess.run(
            ["openssl", "genrsa", "-out", str(wd / "sa.key"), "2048"],
            check=True,
            capture_output=True,
        )
        (wd / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self._spawn(
            "etcd",
            [
                shutil.which("etcd") or "etcd",
                "--data-dir", str(wd / "etcd"),
                "--listen-client-urls", etcd_url,
                "--advertise-client-urls", etcd_url,
                "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-cluster", f"default=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync",
            ],
        )  # fmt: skip
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.apiserver_port}",
                "--insecure-port=0",
                f"--cert-dir={wd / 'certs'}",
                f"--token-auth-file={wd / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={wd / 'sa.key'}",
                f"--service-account-signing-key-file={wd / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/24",
                # No serviceaccount controller runs, so no "default" ServiceAccounts exist.
                "--disable-admission-plugins=ServiceAccount",
            ],
        )
        self._wait(self._readyz, "kube-apiserver /readyz")
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "plumb-test",
                            "cluster": {
                                "server": self.server,
                                "certificate-authority": str(self.ca_file),
                            },
                        }
                    ],
                    "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
                    "contexts": [
                        {"name": "admin", "context": {"cluster": "plumb-test", "user": "admin"}}
                    ],
                    "current-context": "admin",
                }
            )
        )
        common = [
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--port=0",
            "--secure-port=0",
        ]
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                *common,
                "--controllers=job,daemonset,replicaset,deployment,garbagecollector,namespace,endpoint",
            ],
        )
        self._spawn("kube-scheduler", [str(self.bin_dir / "kube-scheduler"), *common])
        return self

    def stop(self) -> None:
        """SIGTERM each recorded PID, newest first; SIGKILL what outlives its grace period."""
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.kubeconfig))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The running control plane; skips the k8s tests when its binaries are not built."""
    bin_dir = find_binaries()
    if bin_dir is None:
        pytest.skip(f"Kubernetes control plane not built: run {BUILD_SCRIPT}")
    for tool in ("etcd", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed: run {BUILD_SCRIPT} (it installs etcd-server)")
    plane = ControlPlane(workdir=tmp_path_factory.mktemp("k8s"), bin_dir=bin_dir)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """An admin (system:masters) client of the test cluster."""
    api_client = control_plane.api_client()
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture(scope="module")
def namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> str:
    """The test module's own namespace, its NAMESPACE, created once for the module."""
    name = request.module.NAMESPACE
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )
    return name


@pytest.fixture(scope="session")
def make_node(api: client.ApiClient) -> Iterator[Callable[..., client.V1Node]]:
    """Create a schedulable fake Node (labels, optional GPU capacity); deleted after the run."""
    core = client.CoreV1Api(api)
    created: list[str] = []

    def make(name: str, labels: dict[str, str] | None = None, gpus: int = 0) -> client.V1Node:
        core.create_node(
            client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=labels or {}))
        )
        created.append(name)
        # Admission taints new Nodes not-ready until a kubelet reports; there is none.
        until(lambda: core.read_node(name).spec.taints, timeout=5, what=f"{name} taint")
        core.patch_node(name, [{"op": "remove", "path": "/spec/taints"}])
        capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        }
        return core.patch_node_status(name, {"status": status})

    yield make
    for name in created:
        try:
            core.delete_node(name)
        except client.ApiException:
            pass


class PodTokens:
    """Pods of one ServiceAccount in one namespace, and the projected-style tokens the kubelet
    would mint for them. `pod` binds a bare pod straight to a node (there is no kubelet), as
    anyone allowed to create pods there could: the agent's real pods come from the chart's
    DaemonSet instead (`chart_agent_pod`)."""

    def __init__(self, core: client.CoreV1Api, namespace: str, service_account: str):
        self.core, self.namespace, self.sa = core, namespace, service_account
        for create in (
            lambda: core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
            ),
            lambda: core.create_namespaced_service_account(
                namespace,
                client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=service_account)),
            ),
        ):
            try:
                create()
            except client.ApiException as exc:
                if exc.status != 409:  # the chart's namespace and ServiceAccounts exist
                    raise

    def pod(self, name: str, node: str) -> client.V1Pod:
        """Pod `name` on `node`, running as the ServiceAccount, owned by nothing."""
        return self.core.create_namespaced_pod(
            self.namespace,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1PodSpec(
                    node_name=node,
                    service_account_name=self.sa,
                    automount_service_account_token=False,
                    containers=[client.V1Container(name="agent", image="plumb:test")],
                ),
            ),
        )

    def token(self, pod: client.V1Pod | None, audience: str = "plumb") -> str:
        """A token for the ServiceAccount (TokenRequest), bound to `pod` when given."""
        bound = (
            client.V1BoundObjectReference(
                kind="Pod", api_version="v1", name=pod.metadata.name, uid=pod.metadata.uid
            )
            if pod is not None
            else None
        )
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[audience], expiration_seconds=600, bound_object_ref=bound
            )
        )
        return self.core.create_namespaced_service_account_token(
            self.sa, self.namespace, request
        ).status.token


class AgentDaemonSet:
    """A DaemonSet standing in for the chart's agent: a namespace, ServiceAccount and name of
    its own, on Nodes labelled `plumb.test/agents=<name>` only, so it never lands on other
    tests' Nodes (nor the chart's DaemonSet on its). Its pods are made by the real DaemonSet
    controller and bound by the real scheduler, with the controller ownerReference the chart's
    agent pods carry; its tokens are bound to them as the kubelet's projected token is."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, sa: str = "plumb-agent"):
        self.core = client.CoreV1Api(api)
        self.namespace, self.name, self.sa = namespace, name, sa
        self.tokens = PodTokens(self.core, namespace, sa)
        labels = {"app": name}
        client.AppsV1Api(api).create_namespaced_daemon_set(
            namespace,
            client.V1DaemonSet(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1DaemonSetSpec(
                    selector=client.V1LabelSelector(match_labels=labels),
                    template=client.V1PodTemplateSpec(
                        metadata=client.V1ObjectMeta(labels=labels),
                        spec=client.V1PodSpec(
                            service_account_name=sa,
                            automount_service_account_token=False,
                            node_selector=self.node_labels,
                            containers=[client.V1Container(name="agent", image="plumb:test")],
                        ),
                    ),
                ),
            ),
        )

    @property
    def node_labels(self) -> dict[str, str]:
        """The labels a Node needs for this DaemonSet to run a pod on it."""
        return {"plumb.test/agents": self.name}

    def pod(self, node: str) -> client.V1Pod:
        """The DaemonSet's pod on `node`, once the controller made it and it is bound."""

        def bound() -> client.V1Pod | None:
            pods = self.core.list_namespaced_pod(
                self.namespace,
                label_selector=f"app={self.name}",
                field_selector=f"spec.nodeName={node}",
            ).items
            return next((p for p in pods if p.metadata.deletion_timestamp is None), None)

        return until(bound, timeout=30, what=f"DaemonSet {self.name}'s pod on {node}")

    def token(self, node: str) -> str:
        """The token the kubelet would mint for the DaemonSet's pod on `node`."""
        return self.tokens.token(self.pod(node))

    def serve_env(self, kubeconfig: Path) -> dict[str, str]:
        """`plumb serve` settings for kubernetes auth with this DaemonSet as the agent's, the
        settings the chart gives the aggregator for its own."""
        return {
            "PLUMB_AUTH__MODE": "kubernetes",
            "PLUMB_AUTH__KUBECONFIG": str(kubeconfig),
            "PLUMB_AUTH__AGENT_NAMESPACE": self.namespace,
            "PLUMB_AUTH__AGENT_SERVICE_ACCOUNT": self.sa,
            "PLUMB_AUTH__AGENT_DAEMONSET": self.name,
        }

    @property
    def workload(self) -> AgentWorkload:
        """The same, as the aggregator's AgentWorkload."""
        return AgentWorkload(self.namespace, self.sa, self.name)


@pytest.fixture(scope="session")
def helm_binary() -> str:
    return helm_path()


@dataclass(frozen=True)
class Release:
    """The chart as applied to the test cluster."""

    name: str
    namespace: str
    objects: list[dict]


@pytest.fixture(scope="session")
def plumb_release(
    api: client.ApiClient, helm_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Release:
    """`helm template` for the server's version, then server-side apply of every object."""
    from kubernetes import dynamic

    namespace = "plumb"
    version = client.VersionApi(api).get_code().git_version.lstrip("v").split("-")[0]
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    rendered = subprocess.run(
        [
            helm_binary, "template", "plumb", str(ROOT / "deploy" / "helm" / "plumb"),
            "--namespace", namespace, "--kube-version", version,
        ],
        capture_output=True, text=True, env=env, check=True, timeout=60,
    ).stdout  # fmt: skip
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    dyn = dynamic.DynamicClient(api)
    for obj in objects:
        resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=obj["metadata"].get("namespace") if resource.namespaced else None,
            field_manager="plumb-test",
            force_conflicts=True,
        )
    return Release(name="plumb", namespace=namespace, objects=objects)
