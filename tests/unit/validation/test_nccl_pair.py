"""The two-node NCCL checks: which nodes pair up, the objects they create, and the grade of real
nccl-tests logs (shared/real-captures/nccl-tests, copied into tests/data/real/nccl-tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import kubernetes_validate
import pytest
from kubernetes import client

from plumb import nccltests
from plumb.aggregator.recipes import RecipeError, load_catalog
from plumb.aggregator.recipes.catalog import default_root
from plumb.aggregator.recipes.check_catalog import Minimum
from plumb.aggregator.validation.nccl_pair import Pair, RunNodes, choose_pair, grade, manifests
from plumb.facts import Reading

CATALOG = load_catalog()
NET = CATALOG.checks.by_id["nccl-allreduce-net"]
NVLS = CATALOG.checks.by_id["nccl-allreduce-nvls"]
CAPTURES = Path(__file__).parents[2] / "data" / "real" / "nccl-tests"


def gpus(name: str, pci: str, count: int, *, fm: bool = False, nvlink: int = 18, **extra):
    out = {
        "driver.fabric_manager_version": Reading.ok("580.65.06") if fm else Reading.not_supported()
    }
    for i in range(count):
        out |= {
            f"gpus[{i}].index": Reading.ok(i),
            f"gpus[{i}].name": Reading.ok(name),
            f"gpus[{i}].pci_device_id": Reading.ok(pci),
            f"gpus[{i}].nvlink_links_total": Reading.ok(nvlink),
        } | {f"gpus[{i}].{k}": Reading.ok(v) for k, v in extra.items()}
    return out


H100 = gpus("NVIDIA H100 80GB HBM3", "0x2330", 8, fm=True)
A100 = gpus("NVIDIA A100-SXM4-80GB", "0x20b2", 8, fm=True, nvlink=12)
L40S = gpus("NVIDIA L40S", "0x26b9", 2, nvlink=0)


def gb200(cluster: str) -> dict[str, Reading]:
    return gpus(
        "NVIDIA GB200", "0x2941", 4, fabric_state="completed",
        fabric_cluster_uuid=cluster, fabric_clique_id="32766",
    )  # fmt: skip


def test_the_pair_is_two_twins_of_the_run_first_by_name():
    nodes = RunNodes(CATALOG, {"c-a100": A100, "b-h100": H100, "a-h100": H100, "d-l40s": L40S})
    assert choose_pair(NET, nodes) == Pair(("a-h100", "b-h100"), "H100 SXM5", 8, "nvswitch")


def test_no_two_twins_is_a_skip_naming_each_group():
    why = choose_pair(NET, RunNodes(CATALOG, {"a-h100": H100, "c-a100": A100}))
    assert why == (
        "no two nodes of the run are twins (same GPU model, GPU count and fabric): "
        "a-h100 (H100 SXM5 x8, nvswitch); c-a100 (A100 SXM4 80GB x8, nvswitch)"
    )
    assert choose_pair(NET, RunNodes(CATALOG, {})) == "no GPU node of the run has reported facts"


def test_nvls_skips_ampere_on_nvswitch_and_pcie_nodes_with_the_reason():
    why = choose_pair(NVLS, RunNodes(CATALOG, {"a": A100, "b": A100, "c": L40S}))
    assert why == (
        "no node of the run has an NVLS fabric (fabric nvswitch on hopper or blackwell GPUs): "
        "a (A100 SXM4 80GB, ampere, nvswitch); b (A100 SXM4 80GB, ampere, nvswitch); "
        "c (L40S, ada, pcie)"
    )
    assert choose_pair(NVLS, RunNodes(CATALOG, {"a": H100, "b": H100})) == Pair(
        ("a", "b"), "H100 SXM5", 8, "nvswitch"
    )


def test_nvls_pairs_gb200_trays_of_one_nvlink_domain_only():
    nodes = {"t1": gb200("rack-1"), "t2": gb200("rack-2"), "t3": gb200("rack-1")}
    assert choose_pair(NVLS, RunNodes(CATALOG, nodes)) == Pair(("t1", "t3"), "GB200", 4, "nvswitch")
    # Over the network any two twin trays do.
    assert choose_pair(NET, RunNodes(CATALOG, nodes)).nodes == ("t1", "t2")


H100_PAIR = Pair(("node-a", "node-b"), "H100 SXM5", 8, "nvswitch")


def objects(check=NET, pair=H100_PAIR):
    return manifests("plumb-x-123456", check, pair, ("PRIVATE", "ssh-ed25519 AAAA plumb-nccl\n"))


def test_the_workload_is_a_secret_a_headless_service_and_two_pinned_jobs():
    secret, service, launcher, worker = objects()
    assert secret.metadata.name == service.metadata.name == "plumb-x-123456"
    assert secret.string_data == {
        "id_ed25519": "PRIVATE",
        "authorized_keys": "ssh-ed25519 AAAA plumb-nccl\n",
    }
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector == {"plumb.dev/nccl-pair": "plumb-x-123456"}
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(2222, 2222)]
    assert (launcher.metadata.name, worker.metadata.name) == (
        "plumb-x-123456-launcher",
        "plumb-x-123456-worker",
    )
    for job, role, node in ((launcher, "launcher", "node-a"), (worker, "worker", "node-b")):
        assert job.spec.backoff_limit == 0
        assert job.spec.active_deadline_seconds == 1230
        pod = job.spec.template.spec
        assert job.spec.template.metadata.labels["plumb.dev/role"] == role
        assert job.spec.template.metadata.labels["plumb.dev/nccl-pair"] == "plumb-x-123456"
        assert (pod.hostname, pod.subdomain) == (f"plumb-x-123456-{role}", "plumb-x-123456")
        term = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        field = term.node_selector_terms[0].match_fields[0]
        assert (field.key, field.operator, field.values) == ("metadata.name", "In", [node])
        assert pod.automount_service_account_token is False
        assert pod.restart_policy == "Never"
        (c,) = pod.containers
        assert c.image == "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1"
        assert c.command[:2] == ["bash", "-c"] and "mpirun" in c.command[2]
        assert c.resources.limits == {"nvidia.com/gpu": "8"}
        assert c.security_context.capabilities.add == ["IPC_LOCK"]
        env = {e.name: e.value for e in c.env}
        assert env["PLUMB_ROLE"] == role
        assert env["PLUMB_HOSTS"] == (
            "plumb-x-123456-launcher.plumb-x-123456:8,plumb-x-123456-worker.plumb-x-123456:8"
        )
        assert env["PLUMB_WORKER"] == "plumb-x-123456-worker.plumb-x-123456"
        assert (env["PLUMB_NP"], env["PLUMB_GPUS"]) == ("16", "8")
        assert env["PLUMB_COMMAND"] == "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1"
        assert (env["NCCL_NVLS_ENABLE"], env["NCCL_MNNVL_ENABLE"]) == ("0", "0")
        volumes = {v.name: v for v in pod.volumes}
        assert volumes["ssh"].secret.secret_name == "plumb-x-123456"
        assert volumes["ssh"].secret.default_mode == 0o400
        assert volumes["shm"].empty_dir.medium == "Memory"
        assert {(m.name, m.mount_path) for m in c.volume_mounts} == {
            ("ssh", "/etc/plumb-ssh"),
            ("shm", "/dev/shm"),
        }


def test_the_nvls_workload_restricts_nccl_to_nvls_and_extra_resources_are_requested():
    check = NVLS.model_copy(update={"parameters": {**NVLS.parameters, "resources": "rdma/ib=4"}})
    _, _, launcher, _ = objects(check, Pair(("t1", "t2"), "GB200", 4, "nvswitch"))
    (c,) = launcher.spec.template.spec.containers
    env = {e.name: e.value for e in c.env}
    assert (env["NCCL_ALGO"], env["NCCL_NVLS_ENABLE"]) == ("NVLS,NVLSTree", "1")
    assert c.resources.limits == {"nvidia.com/gpu": "4", "rdma/ib": "4"}
    assert env["PLUMB_NP"] == "8"


def test_the_manifests_pass_the_strict_schema_of_kubernetes_1_25_and_1_33():
    api = client.ApiClient()
    for obj, kind in zip(objects(), ("Secret", "Service", "Job", "Job"), strict=True):
        body = api.sanitize_for_serialization(obj)
        body |= {"apiVersion": "batch/v1" if kind == "Job" else "v1", "kind": kind}
        for version in ("1.25", "1.33"):  # the oldest schema it ships; 1.20: tests/integration
            kubernetes_validate.validate(body, version, strict=True)


def capture(name: str) -> tuple[nccltests.NcclRun, ...]:
    return nccltests.parse((CAPTURES / name).read_text())


L40S_PAIR = Pair(("nvidiatools-29", "nvidiatools-30"), "L40S", 2, "pcie")


def with_minimum(value: float):
    row = Minimum(model="L40S", fabric="pcie", gpus=2, value=value, unit="GB/s", source="test")
    return NET.model_copy(update={"minima": (row,)})


def test_a_real_two_node_run_passes_at_its_minimum_and_fails_below_it():
    # schmaustech_l40s_2x2.txt: 4 ranks on 2 nodes, 8589934592 B row, out-of-place busbw 9.63.
    runs = capture("schmaustech_l40s_2x2.txt")
    status, message, details = grade(runs, with_minimum(9.5), L40S_PAIR, {})
    assert status == "pass", message
    assert message == (
        "9.63 GB/s bus bandwidth at 8589934592 B across nvidiatools-29, nvidiatools-30,"
        " minimum 9.5 for L40S on pcie"
    )
    assert details["busbw_gbps"] == "9.63" and details["nccl_version"] == "2.27.3+cuda12.9"
    status, message, _ = grade(runs, with_minimum(12), L40S_PAIR, {})
    assert status == "fail"
    assert message.endswith(": below the minimum 12 for L40S on pcie")


def test_no_known_minimum_is_a_warning_that_says_so_never_a_pass():
    # dranet_h200_2x1_mpi_noise.txt: H200, 2 nodes x 1 GPU, 8589934592 B at 31.89 GB/s.
    pair = Pair(("worker-0", "worker-1"), "H200 SXM", 1, "nvswitch")
    status, message, _ = grade(capture("dranet_h200_2x1_mpi_noise.txt"), NET, pair, {})
    assert status == "warn"
    assert message == (
        "31.89 GB/s bus bandwidth at 8589934592 B across worker-0, worker-1;"
        " no minimum known for H200 SXM x1 on nvswitch: not graded"
    )


def test_a_hung_run_and_a_run_of_the_wrong_size_fail():
    pair = Pair(("a", "b"), "B200", 8, "nvswitch")
    runs = capture("dranet_b200_2node_allgather_hang_truncated.txt")
    status, message, _ = grade(runs, NET, pair, {})
    assert (status, message) == (
        "fail",
        "the nccl-tests run is incomplete:"
        " no result rows (the run hung or was cut before its table)",
    )
    status, message, _ = grade(capture("schmaustech_l40s_2x2.txt"), with_minimum(1), pair, {})
    assert (status, message) == ("fail", "the all-reduce ran 4 ranks, not 16 (8 on each node)")
    assert grade((), NET, pair, {})[:2] == ("fail", "the launcher's log holds no nccl-tests output")


def test_a_minimum_naming_an_unknown_gpu_model_or_fabric_is_refused(tmp_path):
    root = tmp_path / "recipes"
    shutil.copytree(default_root(), root)
    path = root / "checks" / "nccl.yaml"
    text = path.read_text().replace("model: H200 SXM", "model: H200X", 1)
    path.write_text(text.replace("fabric: nvswitch", "fabric: nvswich", 1))
    with pytest.raises(RecipeError) as caught:
        load_catalog(root)
    assert "unknown GPU model 'H200X'" in str(caught.value)
    assert "unknown fabric 'nvswich'" in str(caught.value)
