"""AICR both ways against real documents: a real snapshot (tests/data/real/aicr/README.md) read
into criteria, Plumb's snapshot compared with it key by key, and AICR's own criteria files.

Every expected value below is read by hand from the files, never from the code's output.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from plumb.aggregator.aicr import (
    criteria_from_recipe_criteria,
    criteria_from_snapshot,
    snapshot,
)
from plumb.aggregator.errors import InvalidInput, TooLarge
from plumb.aggregator.recipes import Criteria, CriteriaError, check_criteria, load_catalog
from plumb.aggregator.untrusted import load_yaml
from plumb.facts import Reading

DATA = Path(__file__).parents[2] / "data" / "real" / "aicr"
CATALOG = load_catalog()


def real_snapshot() -> dict:
    return load_yaml((DATA / "cns_snapshot_h100.yaml").read_text())


def measured(doc: dict) -> dict[str, dict[str, dict]]:
    """{type: {subtype: data}} of a snapshot."""
    return {
        m["type"]: {s["subtype"]: s.get("data") or {} for s in m["subtypes"]}
        for m in doc["measurements"]
    }


# --- snapshot -> criteria ----------------------------------------------------------------


def test_the_real_h100_snapshot_resolves_as_eks_h100_ubuntu() -> None:
    # K8s.node.provider: eks; GPU.smi gpu.model: NVIDIA H100 80GB HBM3; OS.release.ID: ubuntu.
    # No snapshot says what the cluster is for: intent and platform stay any.
    found = criteria_from_snapshot(real_snapshot(), CATALOG)
    assert found.criteria == Criteria(service="eks", accelerator="h100", os="ubuntu")
    assert found.sources == {
        "service": "K8s.node.provider",
        "accelerator": "GPU.smi.gpu.model",
        "os": "OS.release.ID",
    }
    assert found.warnings == ()
    assert found.source_node == "ip-10-0-158-18.ec2.internal"  # metadata.source


def _without(doc: dict, kind: str, subtype: str, key: str) -> dict:
    for m in doc["measurements"]:
        for s in m["subtypes"]:
            if m["type"] == kind and s["subtype"] == subtype:
                s["data"].pop(key)
    return doc


def test_without_a_provider_the_server_version_tells_the_service() -> None:
    # v1.30.14-eks-3025e55 carries EKS's mark; the provider-id aws:///... its scheme.
    doc = _without(real_snapshot(), "K8s", "node", "provider")
    found = criteria_from_snapshot(doc, CATALOG)
    assert found.criteria.service == "eks"
    assert found.sources["service"] == "K8s.node.provider-id"
    doc = _without(doc, "K8s", "node", "provider-id")
    found = criteria_from_snapshot(doc, CATALOG)
    assert (found.criteria.service, found.sources["service"]) == ("eks", "K8s.server.version")


def test_a_gpu_the_catalog_does_not_know_is_named_never_silently_any() -> None:
    doc = real_snapshot()
    for m in doc["measurements"]:
        if m["type"] == "GPU":
            m["subtypes"][0]["data"]["gpu.model"] = "NVIDIA Z999 Prototype"
    found = criteria_from_snapshot(doc, CATALOG)
    assert found.criteria.accelerator == "any"
    assert any("NVIDIA Z999 Prototype" in w for w in found.warnings)


def test_the_cluster_wide_gpu_label_and_the_pci_model_come_before_smi() -> None:
    doc = real_snapshot()
    doc["measurements"].append(
        {
            "type": "NodeTopology",
            "subtypes": [
                {"subtype": "label", "data": {"nvidia.com/gpu.product": "NVIDIA-L40S|gpu-1"}}
            ],
        }
    )
    found = criteria_from_snapshot(doc, CATALOG)
    assert found.criteria.accelerator == "l40s"
    assert found.sources["accelerator"] == "NodeTopology.label.nvidia.com/gpu.product"
    newer = real_snapshot()
    newer["measurements"].append(
        {"type": "GPU", "subtypes": [{"subtype": "hardware", "data": {"model": "b200"}}]}
    )
    # Measurements list each type once; a second GPU entry replaces the subtypes it names.
    found = criteria_from_snapshot(newer, CATALOG)
    assert (found.criteria.accelerator, found.sources["accelerator"]) == (
        "b200",
        "GPU.hardware.model",
    )


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ([], "must be a mapping"),
        ({"kind": "RecipeCriteria"}, "expected kind Snapshot"),
        ({"kind": "Snapshot", "apiVersion": "wrong.version/v1"}, "unsupported Snapshot apiVersion"),
        ({"kind": "Snapshot", "apiVersion": "aicr.run/v1alpha2"}, "measurements must be a list"),
        (
            {"kind": "Snapshot", "apiVersion": "aicr.run/v1alpha2", "measurements": [{"x": 1}]},
            "measurements[0] must be a mapping with a type",
        ),
        (
            {
                "kind": "Snapshot",
                "apiVersion": "aicr.run/v1alpha2",
                "measurements": [{"type": "OS", "subtypes": [{"subtype": "release", "data": []}]}],
            },
            "measurements[0].subtypes[0].data must be a mapping",
        ),
    ],
)
def test_a_malformed_snapshot_is_refused_naming_what_is_wrong(doc: object, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        criteria_from_snapshot(doc, CATALOG)
    assert says in str(caught.value)
    assert caught.value.hint


def test_a_hostile_snapshot_file_is_refused_before_it_expands() -> None:
    lines = ["kind: Snapshot", "l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 10) + "]" for n in range(1, 9)]
    laughs = "\n".join(lines)  # a few hundred bytes that expand to 10**9 scalars
    with pytest.raises(TooLarge):
        load_yaml(laughs)


# --- Plumb's snapshot against the real one -------------------------------------------------

# The real node as Plumb's collectors would report it, each value read by hand from the capture.
CAPTURED_NODE = {
    "host.kernel": Reading.ok("6.8.0-1024-aws"),
    "host.architecture": Reading.ok("x86_64"),
    "host.os_id": Reading.ok("ubuntu"),
    "host.os_version_id": Reading.ok("24.04"),
    "host.os_pretty_name": Reading.ok("Ubuntu 24.04.3 LTS"),
    "host.container_runtime": Reading.ok("containerd"),
    "host.container_runtime_version": Reading.ok("1.7.24"),
    "host.kubelet_version": Reading.ok("v1.30.14-eks-3025e55"),
    "host.kernel_cmdline": Reading.ok(
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-1024-aws root=PARTUUID=0123 ro apparmor=1 audit=1"
        " audit_backlog_limit=8192 hugepages=5128 hugepagesz=2M nokaslr panic=-1"
        " security=apparmor"
    ),
    "host.kernel_modules": Reading.ok("nvidia nvidia_modeset nvidia_uvm"),
    "host.sysctls[0].name": Reading.ok("vm.swappiness"),
    "host.sysctls[0].value": Reading.ok("60"),
    "host.sysctls[1].name": Reading.ok("vm.max_map_count"),
    "host.sysctls[1].value": Reading.ok("262144"),
    "host.sysctls[2].name": Reading.ok("net.core.rmem_max"),
    "host.sysctls[2].value": Reading.not_supported(),
    "host.systemd_units[0].name": Reading.ok("containerd.service"),
    "host.systemd_units[0].fragment_path": Reading.ok("/lib/systemd/system/containerd.service"),
    "host.systemd_units[0].unit_file_state": Reading.ok("enabled"),
    "host.systemd_units[0].running": Reading.ok(True),
    "host.systemd_units[1].name": Reading.ok("docker.service"),
    "host.systemd_units[1].fragment_path": Reading.not_supported(),
    "host.systemd_units[1].unit_file_state": Reading.not_supported(),
    "host.systemd_units[1].running": Reading.not_supported(),
    "host.systemd_units[2].name": Reading.ok("kubelet.service"),
    "host.systemd_units[2].fragment_path": Reading.not_supported(),
    "host.systemd_units[2].unit_file_state": Reading.not_supported(),
    "host.systemd_units[2].running": Reading.not_supported(),
    "driver.driver_version": Reading.ok("570.133.20"),
    "driver.cuda_driver_version": Reading.ok("12.8"),
} | {
    f"gpus[{i}].{leaf}": Reading.ok(value)
    for i in range(8)
    for leaf, value in {
        "index": i,
        "name": "NVIDIA H100 80GB HBM3",
        "architecture": "hopper",  # NVML's name; nvidia-smi writes Hopper
        "persistence_mode": False,
        "addressing_mode": "hmm",
        "vbios_version": "96.00.BC.00.01",
        "gsp_firmware_version": "570.133.20",
    }.items()
}

# What the real snapshot has and Plumb's does not, and why (shared/reference/aicr.md §2.2).
NOT_WRITTEN = {
    ("K8s", "image"): "Plumb reads no pod images from the agent's node",
    ("K8s", "policy"): "the GPU Operator's ClusterPolicy is not a node fact",
    ("K8s", "server", "goVersion"): "the API server's Go version is not a node fact",
    ("K8s", "node", "provider-id"): "Plumb keeps the provider, not the instance's id",
    ("GPU", "smi", "gpu.display-mode"): "Plumb does not collect the display mode",
    ("GPU", "smi", "gpu.display-active"): "Plumb does not collect the display mode",
    # The capture's os-release keys beyond the three Plumb collects (host.os_*).
    **{
        ("OS", "release", k): "Plumb collects ID, VERSION_ID and PRETTY_NAME only"
        for k in (
            "BUG_REPORT_URL",
            "HOME_URL",
            "ID_LIKE",
            "LOGO",
            "NAME",
            "PRIVACY_POLICY_URL",
            "SUPPORT_URL",
            "UBUNTU_CODENAME",
            "VERSION",
            "VERSION_CODENAME",
        )
    },
}
# Of a unit's ~370 D-Bus properties, Plumb reads these five from files (agent has no D-Bus).
UNIT_KEYS = {"ActiveState", "SubState", "LoadState", "FragmentPath", "UnitFileState"}
# Plumb's kmod and sysctl are the subsets named in agent/collect/kernel.py.
SUBSETS = {("OS", "kmod"), ("OS", "sysctl")}
# Keys both have whose values differ, and why.
VALUE_DIFFERS = {
    ("K8s", "node", "os-image"): "the capture's Node says Ubuntu 22.04.5 LTS while its OS.release"
    " says 24.04.3 (two sources on one node); Plumb writes the host's PRETTY_NAME in both",
}
# What Plumb's snapshot has and the real one does not, and why.
EXTRA = {
    ("GPU", "hardware"): "AICR's newer driver-free GPU subtype; the capture predates it",
    ("GPU", "devices"): "one item per GPU: AICR reads only the first GPU",
    ("NodeTopology", "summary"): "Plumb knows the fleet's size; the capture has no topology",
}


def test_plumbs_snapshot_has_the_real_snapshots_keys_except_those_listed() -> None:
    ours = measured(snapshot("ip-10-0-158-18.ec2.internal", CAPTURED_NODE, **_ARGS))
    real = measured(real_snapshot())
    assert set(ours) - set(real) == {"NodeTopology"}
    assert set(real) <= set(ours)
    for kind, subtypes in real.items():
        for name, data in subtypes.items():
            if (kind, name) in NOT_WRITTEN:
                assert name not in ours[kind]
                continue
            mine = ours[kind][name]
            if kind == "SystemD":
                assert set(mine) == UNIT_KEYS and UNIT_KEYS <= set(data)
            elif (kind, name) in SUBSETS:
                assert set(mine) <= set(data)
            else:
                missing = {k for k in set(data) - set(mine) if (kind, name, k) not in NOT_WRITTEN}
                assert missing == set(), (kind, name)
            # Same key, same value and spelling as the real snapshot.
            shared = {k for k in mine if k in data and (kind, name, k) not in VALUE_DIFFERS}
            assert {k: data[k] for k in shared} == {k: mine[k] for k in shared}, (kind, name)
    extra = {(k, s) for k, subs in ours.items() for s in subs if s not in real.get(k, {})}
    assert extra == set(EXTRA)


_ARGS = dict(
    at=datetime(2026, 1, 2, 18, 1, 13, tzinfo=UTC),
    version="plumb-test",
    service="eks",
    accelerator="h100",
)


def test_plumbs_snapshot_values_are_spelled_as_the_real_one() -> None:
    ours = measured(snapshot("ip-10-0-158-18.ec2.internal", CAPTURED_NODE, **_ARGS))
    assert ours["GPU"]["smi"]["gpu.product-architecture"] == "Hopper"
    assert ours["GPU"]["smi"]["gpu.persistence-mode"] == "Disabled"
    assert ours["GPU"]["smi"]["gpu.addressing-mode"] == "HMM"
    assert ours["OS"]["grub"]["nokaslr"] == "" and "root" not in ours["OS"]["grub"]
    assert ours["OS"]["kmod"] == {"nvidia": True, "nvidia_modeset": True, "nvidia_uvm": True}
    assert ours["OS"]["sysctl"] == {
        "/proc/sys/kernel/osrelease": "6.8.0-1024-aws",
        "/proc/sys/vm/max_map_count": "262144",
        "/proc/sys/vm/swappiness": "60",
    }
    assert ours["SystemD"]["docker.service"] == {
        "ActiveState": "inactive",
        "SubState": "dead",
        "LoadState": "not-found",
        "FragmentPath": "",
        "UnitFileState": "",
    }
    # Plumb's snapshot read back gives the criteria Plumb gave the node.
    doc = snapshot("n", CAPTURED_NODE, **_ARGS)
    found = criteria_from_snapshot(doc, CATALOG)
    assert found.criteria == Criteria(service="eks", accelerator="h100", os="ubuntu")


# --- AICR's own RecipeCriteria files ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("criteria.yaml", {"service": "eks", "accelerator": "h100", "os": "ubuntu",
                           "intent": "training"}),
        ("criteria.json", {"service": "gke", "accelerator": "a100", "os": "ubuntu",
                           "intent": "inference"}),
        ("partial.yaml", {"accelerator": "h100"}),
    ],
)  # fmt: skip
def test_aicrs_criteria_files_read_as_written(name: str, expected: dict) -> None:
    got = criteria_from_recipe_criteria(load_yaml((DATA / name).read_text()))
    assert got == {"service": "any", "os": "any", "intent": "any", "platform": "any",
                   "nodes": 0, **expected}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "says"),
    [("invalid-kind.yaml", "expected kind RecipeCriteria"),
     ("invalid-version.yaml", "unsupported apiVersion")],
)  # fmt: skip
def test_aicrs_invalid_criteria_files_are_refused(name: str, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        criteria_from_recipe_criteria(load_yaml((DATA / name).read_text()))
    assert says in str(caught.value) and caught.value.hint


def test_an_unknown_enum_value_is_refused_by_the_resolver_naming_the_allowed() -> None:
    spec = criteria_from_recipe_criteria(load_yaml((DATA / "invalid-enum.yaml").read_text()))
    with pytest.raises(CriteriaError, match="eks"):
        check_criteria(CATALOG, Criteria(**spec))
