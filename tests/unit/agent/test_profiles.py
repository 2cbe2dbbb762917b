"""Every shipped profile simulates a node whose facts are complete and canonical."""

from __future__ import annotations

import pytest

from plumb.agent.collect import collect_all
from plumb.agent.collect.nvml import _GPU_FIELDS
from plumb.agent.simulate.profile import shipped_profiles
from plumb.facts import content_hash, flatten, unflatten

EXPECTED = {  # profile: (GPU count, NVML name, architecture, compute capability, PCI device id)
    "dgx-h100": (8, "NVIDIA H100 80GB HBM3", "hopper", "9.0", "0x2330"),
    "hgx-a100": (8, "NVIDIA A100-SXM4-80GB", "ampere", "8.0", "0x20B2"),
    "h200": (8, "NVIDIA H200", "hopper", "9.0", "0x2335"),
    "l4": (1, "NVIDIA L4", "ada", "8.9", "0x27B8"),
    "l40s": (4, "NVIDIA L40S", "ada", "8.9", "0x26B9"),
    "gb200": (4, "NVIDIA GB200", "blackwell", "10.0", "0x2941"),
    "rtx-4090": (1, "NVIDIA GeForce RTX 4090", "ada", "8.9", "0x2684"),
}
HOST_PATHS = [
    "host.hostname",
    "host.boot_id",
    "host.kernel",
    "host.architecture",
    "host.os_id",
    "host.os_version_id",
    "host.os_pretty_name",
    "host.container_runtime",
    "host.container_runtime_version",
    "host.kubelet_version",
    "driver.driver_version",
    "driver.nvml_version",
    "driver.cuda_driver_version",
    "driver.kernel_module_flavour",
    "driver.fabric_manager_version",
    "driver.kernel_module_version",
    "driver.modules[0].name",
    "driver.modules[0].version",
    "driver.modules[0].parameters",
    "host.kernel_cmdline",
    "host.kernel_modules",
    "host.sysctls[0].name",
    "host.sysctls[0].value",
    "host.systemd_units[0].name",
    "host.systemd_units[0].fragment_path",
    "host.systemd_units[0].unit_file_state",
    "host.systemd_units[0].running",
    "host.systemd_units[0].package_version",
    "cuda.cuda_toolkit_version",
]


def test_the_required_profiles_are_shipped():
    assert set(EXPECTED) <= set(shipped_profiles())


@pytest.mark.parametrize("name", shipped_profiles())
def test_each_shipped_profile_gives_complete_canonical_facts(simulate, gpu_fields, name):
    facts = collect_all(simulate(name, f"{name}-0").sources())

    assert set(HOST_PATHS) <= set(facts)
    count, gpu_name, arch, capability, device_id = EXPECTED[name]
    assert len(facts) >= len(HOST_PATHS) + count * len(_GPU_FIELDS)
    assert flatten(unflatten(facts)) == facts
    for index in range(count):
        gpu = gpu_fields(facts, index)
        assert set(gpu) == set(_GPU_FIELDS)
        assert gpu["index"].value == index
        assert gpu["name"].value == gpu_name
        assert gpu["architecture"].value == arch
        assert gpu["compute_capability"].value == capability
        assert gpu["pci_device_id"].value == device_id
    assert not any(r.status == "error" for r in facts.values()), {
        p: r.error for p, r in facts.items() if r.status == "error"
    }


def test_dgx_h100_reports_its_stack_as_the_profile_says(simulate):
    facts = collect_all(simulate("dgx-h100", "p5-a").sources())
    values = {p: r.value for p, r in facts.items()}

    assert values["host.hostname"] == "p5-a"
    assert values["host.instance_type"] == "p5.48xlarge"
    assert values["host.cloud_provider"] == "aws"
    assert values["driver.driver_version"] == "580.173.02"
    assert values["driver.cuda_driver_version"] == "13.0"
    assert values["driver.kernel_module_flavour"] == "open"
    assert values["driver.fabric_manager_version"] == "580.173.02"
    assert values["cuda.cuda_toolkit_version"] == "12.9.1"
    assert values["cuda.runtimes[0].version"] == "12.9"
    assert values["nccl.libraries[0].path"] == "/usr/lib/x86_64-linux-gnu/libnccl.so.2"
    assert values["nccl.libraries[0].version"] == "2.27.7"
    assert values["gpus[7].memory_total_bytes"] == 81559 * 1024 * 1024
    assert values["gpus[7].nvlink_links_up"] == values["gpus[7].nvlink_links_total"] == 18
    assert values["gpus[7].power_limit_watts"] == 700.0
    assert len({values[f"gpus[{i}].uuid"] for i in range(8)}) == 8
    assert len({values[f"gpus[{i}].pci_bus_id"] for i in range(8)}) == 8


def test_gb200_is_an_aarch64_host(simulate):
    facts = collect_all(simulate("gb200").sources())
    assert facts["host.architecture"].value == "aarch64"
    assert facts["nccl.libraries[0].path"].value == "/usr/lib/aarch64-linux-gnu/libnccl.so.2"


def test_rtx_4090_lacks_only_the_datacenter_features(simulate, gpu_fields):
    facts = collect_all(simulate("rtx-4090").sources())
    gpu = gpu_fields(facts, 0)
    unsupported = {
        "serial",
        "mig_mode_current",
        "mig_mode_pending",
        "ecc_mode_current",
        "ecc_uncorrected_volatile",
        "ecc_uncorrected_aggregate",
        "nvlink_links_up",
        "nvlink_links_total",
        "c2c_mode_enabled",
        "fabric_state",
        "fabric_clique_id",
        "fabric_cluster_uuid",
        "fabric_health",
        # Not set in the profile, so NotSupported: never a made-up value.
        "gsp_firmware_version",
        "addressing_mode",
    }

    assert {name for name, r in gpu.items() if r.status == "not_supported"} == unsupported
    assert all(r.status == "ok" for name, r in gpu.items() if name not in unsupported)


def test_l4_has_no_mig_and_no_nvlink(simulate, gpu_fields):
    gpu = gpu_fields(collect_all(simulate("l4").sources()), 0)
    for name in ("mig_mode_current", "nvlink_links_up", "nvlink_links_total"):
        assert gpu[name].status == "not_supported"
    assert gpu["ecc_mode_current"].value is True


def test_derived_identities_are_deterministic_per_node(simulate):
    first = collect_all(simulate("h200", "node-a").sources())
    again = collect_all(simulate("h200", "node-a").sources())
    other = collect_all(simulate("h200", "node-b").sources())

    assert content_hash(first) == content_hash(again)
    for path in ("host.boot_id", "gpus[0].uuid", "gpus[0].serial"):
        assert first[path] == again[path]
        assert first[path] != other[path]
