"""AICR interop: Plumb facts → AICR Snapshot, AICR RecipeCriteria → Plumb criteria.

The structure checks follow shared/reference/aicr.md §2.1 (Snapshot, Measurement, Subtype,
Reading, ItemEntry) and §1.3 (RecipeCriteria: kind, apiVersion, metadata.name, spec{...}).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from plumb.aggregator.aicr import criteria_from_recipe_criteria, snapshot
from plumb.aggregator.errors import InvalidInput
from plumb.facts import Reading

AT = datetime(2026, 7, 9, 10, 30, tzinfo=UTC)
MEASUREMENT_TYPES = {"K8s", "GPU", "OS", "SystemD", "NodeTopology", "NetworkTopology"}
SCALARS = (str, int, float, bool)


def h100_facts(gpus: int = 8) -> dict[str, Reading]:
    facts = {
        "host.kernel": Reading.ok("6.8.0-1030-aws"),
        "host.architecture": Reading.ok("x86_64"),
        "host.os_id": Reading.ok("ubuntu"),
        "host.os_version_id": Reading.ok("24.04"),
        "host.os_pretty_name": Reading.ok("Ubuntu 24.04.2 LTS"),
        "host.container_runtime": Reading.ok("containerd"),
        "host.container_runtime_version": Reading.ok("2.0.5"),
        "host.kubelet_version": Reading.ok("v1.33.5-eks-113cf36"),
        "host.cloud_provider": Reading.ok("aws"),
        "driver.driver_version": Reading.ok("580.126.20"),
        "driver.cuda_driver_version": Reading.ok("13.0"),
        "nccl.libraries[0].version": Reading.ok("2.27.7"),
    }
    for i in range(gpus):
        facts |= {
            f"gpus[{i}].index": Reading.ok(i),
            f"gpus[{i}].name": Reading.ok("NVIDIA H100 80GB HBM3"),
            f"gpus[{i}].uuid": Reading.ok(f"GPU-{i:04d}"),
            f"gpus[{i}].architecture": Reading.ok("hopper"),
            f"gpus[{i}].persistence_mode": Reading.ok(True),
            f"gpus[{i}].vbios_version": Reading.ok("96.00.89.00.01"),
            f"gpus[{i}].serial": Reading.not_supported(),
        }
    return facts


def measured(doc: dict) -> dict[str, dict[str, dict]]:
    """{type: {subtype: subtype-entry}} of a snapshot."""
    return {m["type"]: {s["subtype"]: s for s in m["subtypes"]} for m in doc["measurements"]}


def assert_aicr_shape(doc: dict) -> None:
    assert doc["kind"] == "Snapshot"
    assert doc["apiVersion"] == "aicr.run/v1alpha2"
    meta = doc["metadata"]
    assert {"timestamp", "version", "source-node"} <= set(meta)
    assert all(isinstance(v, str) for v in meta.values())  # map[string]string
    types = [m["type"] for m in doc["measurements"]]
    assert set(types) <= MEASUREMENT_TYPES and len(types) == len(set(types))
    for m in doc["measurements"]:
        assert set(m) == {"type", "subtypes"}
        for sub in m["subtypes"]:
            assert set(sub) <= {"subtype", "data", "context", "items"}
            assert isinstance(sub["subtype"], str)
            assert all(isinstance(k, str) for k in sub["data"])
            assert all(isinstance(v, SCALARS) for v in sub["data"].values())
            for item in sub.get("items", []):
                assert set(item) <= {"data", "context"}  # ItemEntry: no nesting
                assert all(isinstance(v, SCALARS) for v in item["data"].values())


def test_a_node_becomes_an_aicr_snapshot_of_the_documented_shape() -> None:
    doc = snapshot(
        "gpu-1", h100_facts(), at=AT, version="plumb-0.1.0", service="eks", accelerator="h100"
    )
    assert_aicr_shape(doc)
    assert doc["metadata"]["timestamp"] == "2026-07-09T10:30:00Z"
    assert doc["metadata"]["source-node"] == "gpu-1"
    m = measured(doc)
    assert set(m) == {"K8s", "GPU", "OS", "NodeTopology"}
    assert m["K8s"]["server"]["data"] == {
        "version": "v1.33.5-eks-113cf36",
        "platform": "linux/amd64",
    }
    node = m["K8s"]["node"]["data"]
    assert node["provider"] == "eks" and node["source-node"] == "gpu-1"
    assert node["container-runtime-id"] == "containerd://2.0.5"
    assert node["kubelet-version"] == "v1.33.5-eks-113cf36"
    assert node["os-image"] == "Ubuntu 24.04.2 LTS"
    assert m["GPU"]["hardware"]["data"] == {
        "gpu-present": True,
        "gpu-count": 8,
        "driver-loaded": True,
        "detection-source": "nvml",
        "model": "h100",
    }
    smi = m["GPU"]["smi"]["data"]
    assert smi["driver"] == "580.126.20" and smi["cuda-version"] == "13.0"
    assert smi["gpu.model"] == "NVIDIA H100 80GB HBM3" and smi["gpu.persistence-mode"] == "Enabled"
    devices = m["GPU"]["devices"]["items"]
    assert [d["data"]["uuid"] for d in devices] == [f"GPU-{i:04d}" for i in range(8)]
    assert all("serial" not in d["data"] for d in devices)  # not_supported is left out
    assert m["OS"]["release"]["data"] == {
        "ID": "ubuntu",
        "VERSION_ID": "24.04",
        "PRETTY_NAME": "Ubuntu 24.04.2 LTS",
    }
    # What AICR's os-ubuntu mixin constraint `OS.sysctl./proc/sys/kernel/osrelease >= 6.8` reads.
    assert m["OS"]["sysctl"]["data"] == {"/proc/sys/kernel/osrelease": "6.8.0-1030-aws"}
    assert m["NodeTopology"]["summary"]["data"] == {"node-count": 1}


def test_the_snapshot_survives_a_yaml_round_trip_with_its_types() -> None:
    doc = snapshot("gpu-1", h100_facts(), at=AT, version="v", service="eks", accelerator="h100")
    assert yaml.safe_load(yaml.safe_dump(doc, sort_keys=False)) == doc


def test_what_plumb_does_not_know_is_left_out_not_invented() -> None:
    facts = {"host.kernel": Reading.failed("permission denied")}
    doc = snapshot("bare", facts, at=AT, version="v")
    assert_aicr_shape(doc)
    m = measured(doc)
    assert "provider" not in m["K8s"]["node"]["data"]
    assert m["K8s"]["server"]["data"] == {}
    assert m["GPU"]["hardware"]["data"] == {
        "gpu-present": False,
        "gpu-count": 0,
        "driver-loaded": False,
        "detection-source": "nvml",
    }
    assert "devices" not in m["GPU"] and "sysctl" not in m["OS"]


def test_mixed_gpus_get_no_single_model() -> None:
    facts = h100_facts(2) | {"gpus[1].name": Reading.ok("NVIDIA L4")}
    doc = snapshot("mixed", facts, at=AT, version="v", accelerator="h100")
    assert "model" not in measured(doc)["GPU"]["hardware"]["data"]


def test_recipe_criteria_maps_to_plumb_criteria() -> None:
    doc = yaml.safe_load(
        """
kind: RecipeCriteria
apiVersion: aicr.run/v1alpha2
metadata: {name: h100-eks-ubuntu-training}
spec: {service: eks, accelerator: h100, os: ubuntu, intent: training, platform: kubeflow, nodes: 4}
"""
    )
    assert criteria_from_recipe_criteria(doc) == {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "kubeflow",
        "nodes": 4,
    }


def test_recipe_criteria_aliases_and_defaults_follow_aicr() -> None:
    doc = {
        "kind": "RecipeCriteria",
        "apiVersion": "aicr.nvidia.com/v1alpha1",
        "spec": {"service": "self-managed", "gpu": "GB200", "os": "al2023"},
    }
    assert criteria_from_recipe_criteria(doc) == {
        "service": "any",
        "accelerator": "gb200",
        "os": "amazonlinux",
        "intent": "any",
        "platform": "any",
        "nodes": 0,
    }


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Snapshot"}, "expected kind RecipeCriteria"),
        ({"kind": "RecipeCriteria", "apiVersion": "v9"}, "unsupported apiVersion"),
        ({"kind": "RecipeCriteria", "spec": {"region": "x"}}, "spec.region"),
        ({"kind": "RecipeCriteria", "spec": {"nodes": -1}}, "spec.nodes"),
        ({"kind": "RecipeCriteria", "spec": {"gpu": "h100", "accelerator": "a100"}}, "disagree"),
        (["not", "a", "mapping"], "YAML mapping"),
    ],
)
def test_bad_recipe_criteria_is_invalid_input_naming_the_problem(doc: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        criteria_from_recipe_criteria(doc)
