"""gang-scheduling, platform-health and dra-support's claim, against a stand-in Kubernetes API.

The integration control plane's kube-apiserver (1.20) crashes on custom resources, so
PodGroups, ResourceClaims and CRD discovery come from this stand-in: a real HTTP server that
stores what the checks create (POST), answers reads (GET) and deletes (DELETE) in the shapes of
the Kubernetes API. A test plays the scheduler and kubelet through `on_create`, which edits an
object as it is stored. The checks use the real `kubernetes` client against it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from plumb.aggregator.recipes import load_catalog, resolve
from plumb.aggregator.recipes.criteria import Criteria
from plumb.aggregator.validation.kubernetes import ClusterRecipe, Kube, cluster_recipe, run_check

CATALOG = load_catalog()
CHECKS = CATALOG.checks.by_id
NS = "plumb-validation"
KAI = {"name": "scheduling.run.ai", "versions": [{"groupVersion": "scheduling.run.ai/v2alpha2",
       "version": "v2alpha2"}], "preferredVersion": {"groupVersion": "scheduling.run.ai/v2alpha2",
       "version": "v2alpha2"}}  # fmt: skip


def group(name: str, version: str) -> dict:
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


class StandIn:
    """Objects by path; `requests` records (method, path) of every call, in order."""

    def __init__(self) -> None:
        self.groups: list[dict] = []
        self.objects: dict[str, dict] = {}
        self.resources: dict[str, list[str]] = {}  # "/apis/g/v" -> plurals
        self.requests: list[tuple[str, str]] = []
        self.on_create: Callable[[str, dict], None] = lambda path, obj: None

    def get(self, path: str) -> dict | None:
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": self.groups}
        if path in self.resources:
            names = [{"name": r, "singularName": "", "namespaced": True, "kind": r,
                      "verbs": ["get"]} for r in self.resources[path]]  # fmt: skip
            return {"kind": "APIResourceList", "groupVersion": path[6:], "resources": names}
        if path in self.objects:
            return self.objects[path]
        items = [o for p, o in self.objects.items() if p.rsplit("/", 1)[0] == path]
        if items or path.endswith(("/deployments", "/nodes", "/resourceslices", "/deviceclasses")):
            return {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}
        return None


@pytest.fixture
def api() -> Iterator[tuple[StandIn, Callable[..., Kube]]]:
    stand_in = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def path_only(self) -> str:
            path = self.path.split("?")[0].rstrip("/")
            stand_in.requests.append((self.command, path))
            return path

        def not_found(self) -> None:
            self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "code": 404})  # fmt: skip

        def do_GET(self) -> None:  # noqa: N802  (http.server's names)
            body = stand_in.get(self.path_only())
            self.reply(200, body) if body is not None else self.not_found()

        def do_POST(self) -> None:  # noqa: N802
            path = self.path_only()
            obj = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stand_in.on_create(path, obj)
            stand_in.objects[f"{path}/{obj['metadata']['name']}"] = obj
            self.reply(201, obj)

        def do_DELETE(self) -> None:  # noqa: N802
            path = self.path_only()
            gone = stand_in.objects.pop(path, None)  # the API answers with the object
            self.reply(200, gone) if gone is not None else self.not_found()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")

    def kube(recipe: ClusterRecipe | None = None) -> Kube:
        held = recipe or ClusterRecipe()
        return Kube(client.ApiClient(config), NS, poll_s=0.02, recipe=lambda: held)

    try:
        yield stand_in, kube
    finally:
        server.shutdown()
        thread.join()


def run(kube: Kube, check_id: str, **over):
    return asyncio.run(run_check(kube, CHECKS[check_id].model_copy(update=over)))


def recipe_of(**criteria: str) -> ClusterRecipe:
    return cluster_recipe(CATALOG, [resolve(CATALOG, Criteria(**criteria))])


PODS = f"/api/v1/namespaces/{NS}/pods"
PODGROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"


# -- gang-scheduling ------------------------------------------------------------------------


def test_gang_scheduling_passes_when_the_scheduler_binds_the_whole_gang(api) -> None:
    stand_in, kube = api
    stand_in.groups = [KAI]
    created: list[dict] = []

    def bind(path: str, obj: dict) -> None:
        created.append(obj)
        if path == PODS:  # the scheduler binds each pod as the gang is admitted
            obj["spec"]["nodeName"] = f"gpu-{len(created) - 1}"

    stand_in.on_create = bind
    status, message, details = run(kube(recipe_of()), "gang-scheduling")
    group_name = details["podgroup"]
    assert (status, message) == (
        "pass",
        f"kai-scheduler bound all 2 pods of PodGroup {group_name} (nvidia.com/gpu: 1 each)"
        " together, on gpu-1, gpu-2",
    )
    podgroup, *pods = created
    assert podgroup["kind"] == "PodGroup"
    assert podgroup["spec"] == {"minMember": 2, "queue": "default-queue"}
    for pod in pods:
        assert pod["metadata"]["annotations"] == {"pod-group-name": group_name}
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    # Cleaned up: both pods, then the PodGroup.
    assert [p for m, p in stand_in.requests if m == "DELETE"] == [
        f"{PODS}/{group_name}-0",
        f"{PODS}/{group_name}-1",
        f"{PODGROUPS}/{group_name}",
    ]
    assert stand_in.objects == {}


def test_gang_scheduling_names_the_pending_pods_and_why(api) -> None:
    stand_in, kube = api
    stand_in.groups = [KAI]
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "Resources were found for 1 pods while 2 are required for gang"
                                " scheduling"}  # fmt: skip

    def pend(path: str, obj: dict) -> None:
        if path == PODS:
            obj["status"] = {"phase": "Pending", "conditions": [unschedulable]}

    stand_in.on_create = pend
    status, message, details = run(kube(recipe_of()), "gang-scheduling", timeout_s=0.2)
    g = details["podgroup"]
    why = "Unschedulable: Resources were found for 1 pods while 2 are required for gang scheduling"
    assert status == "fail"
    assert message == (
        f"none of the 2 pods of PodGroup {g} (nvidia.com/gpu: 1 each) was bound within 0.2 s;"
        f" pending {g}-0 ({why}); {g}-1 ({why})"
    )
    assert details[f"{g}-0"] == details[f"{g}-1"] == "pending"


def test_gang_scheduling_fails_a_split_gang(api) -> None:
    stand_in, kube = api
    stand_in.groups = [KAI]

    def bind_first(path: str, obj: dict) -> None:
        if path == PODS and obj["metadata"]["name"].endswith("-0"):
            obj["spec"]["nodeName"] = "gpu-a"

    stand_in.on_create = bind_first
    status, message, details = run(kube(recipe_of()), "gang-scheduling", timeout_s=0.2)
    g = details["podgroup"]
    assert status == "fail"
    assert message == (
        f"kai-scheduler split the gang: bound {g}-0 on gpu-a;"
        f" pending {g}-1 (not yet considered by kai-scheduler)"
    )


def test_gang_scheduling_skips_without_the_scheduler_or_its_api(api) -> None:
    stand_in, kube = api
    no_kai = ClusterRecipe(components={"gpu-operator": "gpu-operator"})
    assert run(kube(no_kai), "gang-scheduling")[:2] == (
        "skip",
        "the recipe deploys no gang scheduler (kai-scheduler)",
    )
    assert run(kube(recipe_of()), "gang-scheduling")[:2] == (
        "skip",
        "no PodGroup API (scheduling.run.ai/v2alpha2): kai-scheduler is not installed",
    )
    assert not [m for m, _ in stand_in.requests if m in ("POST", "DELETE")]


# -- platform-health ------------------------------------------------------------------------


def trainer_deployment(available: int) -> dict:
    return {
        "metadata": {"name": "kubeflow-trainer-controller-manager", "namespace": "kubeflow",
                     "labels": {"app.kubernetes.io/instance": "kubeflow-trainer"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer"}},
                 "template": {"spec": {"containers": [{"name": "manager"}]}}},
        "status": {"availableReplicas": available, "conditions": [
            {"type": "Available", "status": "False" if not available else "True",
             "reason": "MinimumReplicasUnavailable",
             "message": "Deployment does not have minimum availability."}]},
    }  # fmt: skip


def test_platform_health_wants_the_trainer_available_and_its_crds_served(api) -> None:
    stand_in, kube = api
    deployments = "/apis/apps/v1/namespaces/kubeflow/deployments"
    stand_in.objects[f"{deployments}/trainer"] = trainer_deployment(available=0)
    stand_in.groups = [group("trainer.kubeflow.org", "v1alpha1")]
    stand_in.resources["/apis/trainer.kubeflow.org/v1alpha1"] = ["trainjobs", "trainingruntimes"]
    status, message, details = run(kube(recipe_of(platform="kubeflow")), "platform-health")
    assert status == "fail"
    assert message == (
        "kubeflow: Deployment kubeflow/kubeflow-trainer-controller-manager 0/1 available"
        " (MinimumReplicasUnavailable: Deployment does not have minimum availability.);"
        " kubeflow: CRD clustertrainingruntimes.trainer.kubeflow.org is not served"
    )
    assert details == {
        "kubeflow/kubeflow-trainer-controller-manager": "0/1 available",
        "crd/trainjobs.trainer.kubeflow.org": "served",
        "crd/trainingruntimes.trainer.kubeflow.org": "served",
        "crd/clustertrainingruntimes.trainer.kubeflow.org": "not served",
    }

    stand_in.objects[f"{deployments}/trainer"] = trainer_deployment(available=1)
    stand_in.resources["/apis/trainer.kubeflow.org/v1alpha1"].append("clustertrainingruntimes")
    status, message, _ = run(kube(recipe_of(platform="kubeflow")), "platform-health")
    assert (status, message) == ("pass", "kubeflow: 1 Deployments available, 3 CRDs served")


def test_platform_health_names_a_platform_whose_operator_is_missing(api) -> None:
    _, kube = api
    status, message, _ = run(kube(recipe_of(platform="slurm")), "platform-health")
    assert status == "fail"
    assert message == (
        "slurm: no Deployment of release slinky-slurm-operator in slinky;"
        " slurm: CRD controllers.slinky.slurm.net is not served;"
        " slurm: CRD nodesets.slinky.slurm.net is not served"
    )


def test_platform_health_skips_a_recipe_without_platform(api) -> None:
    _, kube = api
    assert run(kube(recipe_of()), "platform-health")[:2] == (
        "skip",
        "the recipe has no platform (recipes.platform is any)",
    )


# -- dra-support: claim and pod -------------------------------------------------------------


def dra_cluster(stand_in: StandIn, version: str = "v1") -> None:
    stand_in.groups = [group("resource.k8s.io", version)]
    base = f"/apis/resource.k8s.io/{version}"
    stand_in.objects["/api/v1/nodes/gpu-a"] = {
        "metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.present": "true"}},
    }
    stand_in.objects[f"{base}/deviceclasses/gpu.nvidia.com"] = {
        "metadata": {"name": "gpu.nvidia.com"}
    }
    stand_in.objects[f"{base}/resourceslices/gpu-a"] = {
        "metadata": {"name": "gpu-a"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-a",
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]},
    }  # fmt: skip


def kubelet_exiting(exit_code: int, said: str) -> Callable[[str, dict], None]:
    """The scheduler allocates gpu-a/gpu-1 to the claim; the pod ends with `exit_code`."""

    def create(path: str, obj: dict) -> None:
        if obj["kind"] == "ResourceClaim":
            obj["status"] = {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-a",
                 "device": "gpu-1"}]}}}  # fmt: skip
        if obj["kind"] == "Pod":
            obj["spec"]["nodeName"] = "gpu-a"
            ended = {"exitCode": exit_code, "reason": "Completed" if not exit_code else "Error",
                     "message": said}  # fmt: skip
            obj["status"] = {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [{"name": "gpu", "image": "cuda", "imageID": "",
                                       "ready": False, "restartCount": 0,
                                       "state": {"terminated": ended}}],
            }  # fmt: skip

    return create


def test_dra_support_allocates_a_claim_and_its_pod_sees_one_gpu(api) -> None:
    stand_in, kube = api
    dra_cluster(stand_in)
    created: list[dict] = []
    play = kubelet_exiting(0, "the pod sees 1 GPU(s)\n")
    stand_in.on_create = lambda path, obj: (created.append(obj), play(path, obj))
    status, message, details = run(kube(), "dra-support")
    name = details["claim"].split("/")[1]
    assert (status, message) == (
        "pass",
        "DeviceClass gpu.nvidia.com; 2 devices on 1 nodes; ResourceClaim"
        f" {name} for one gpu.nvidia.com device was allocated (gpu-a/gpu-1) and its pod on"
        " gpu-a saw one GPU",
    )
    claim, pod = created
    one = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    assert claim["spec"] == {"devices": {"requests": [{"name": "gpu", "exactly": one}]}}
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": name}]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert [p for m, p in stand_in.requests if m == "DELETE"] == [
        f"{PODS}/{name}",
        f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{name}",
    ]


def test_dra_support_fails_a_pod_that_sees_more_than_its_claim(api) -> None:
    stand_in, kube = api
    dra_cluster(stand_in)
    stand_in.on_create = kubelet_exiting(1, "the pod sees 8 GPU(s)\n")
    status, message, details = run(kube(), "dra-support")
    name = details["claim"].split("/")[1]
    assert status == "fail"
    assert message == (
        f"ResourceClaim {name} for one gpu.nvidia.com device was allocated (gpu-a/gpu-1), but"
        " its pod on gpu-a did not see exactly one GPU: exit 1: the pod sees 8 GPU(s)"
    )


def test_dra_support_names_an_unallocated_claim_and_asks_v1beta1_for_its_device(api) -> None:
    stand_in, kube = api
    dra_cluster(stand_in, "v1beta1")
    created: list[dict] = []
    stand_in.on_create = lambda path, obj: created.append(obj)
    status, message, details = run(kube(), "dra-support", timeout_s=0.2)
    name = details["claim"].split("/")[1]
    assert status == "fail"
    assert message == (
        f"ResourceClaim {name} for one gpu.nvidia.com device was not allocated within 0.2 s:"
        " not yet considered by the scheduler"
    )
    assert created[0]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
         "count": 1}
    ]  # fmt: skip
    assert stand_in.objects.keys().isdisjoint({f"{PODS}/{name}"})
