"""A simulated node follows its profile file: edits show up, broken edits do not."""

from __future__ import annotations

import logging

import pytest
import yaml

from plumb.agent.collect import collect_all
from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.profile import ProfileError


def test_editing_the_profile_changes_the_next_collection(profile_copy, write_yaml, tmp_path):
    path = profile_copy("dgx-h100")
    sim = Simulation(str(path), "node-a", tmp_path / "work")
    assert collect_all(sim.sources())["driver.driver_version"].value == "580.173.02"

    data = yaml.safe_load(path.read_text())
    data["driver"]["version"] = "570.86.15"
    data["nccl"] = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2": "2.25.1"}
    write_yaml(path, data)
    facts = collect_all(sim.sources())

    assert facts["driver.driver_version"].value == "570.86.15"
    assert facts["nccl.libraries[0].version"].value == "2.25.1"
    assert "nccl.libraries[1].path" not in facts  # the removed wheel copy is gone from the root


def test_an_unchanged_poll_gives_each_caller_its_own_canonical_facts(simulate):
    sim = simulate()
    first = collect_all(sim.sources())
    first["driver.driver_version"] = None  # a caller's edit must not leak into the next poll
    again = collect_all(sim.sources())
    assert again["driver.driver_version"].value == "580.173.02"
    # Canonical: a double fact the collector read as an int comes back a float.
    assert type(again["gpus[0].power_limit_watts"].value) is float


def test_an_invalid_edit_keeps_the_last_good_profile_and_warns(profile_copy, tmp_path, caplog):
    path = profile_copy("l4")
    sim = Simulation(str(path), "node-a", tmp_path / "work")
    before = collect_all(sim.sources())

    path.write_text("gpus: {count: 0")
    with caplog.at_level(logging.WARNING, logger="plumb.agent.simulate.node"):
        after = collect_all(sim.sources())

    assert after == before
    (record,) = [r for r in caplog.records if r.name == "plumb.agent.simulate.node"]
    assert str(path) in record.error and "invalid YAML" in record.error


def test_a_deleted_profile_keeps_the_last_good_one(profile_copy, tmp_path, caplog):
    path = profile_copy("l4")
    sim = Simulation(str(path), "node-a", tmp_path / "work")
    before = collect_all(sim.sources())
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="plumb.agent.simulate.node"):
        assert collect_all(sim.sources()) == before
        assert collect_all(sim.sources()) == before
    assert len([r for r in caplog.records if r.name == "plumb.agent.simulate.node"]) == 1


def test_an_unusable_profile_fails_at_start(tmp_path):
    with pytest.raises(ProfileError, match="shipped profiles are"):
        Simulation("no-such-profile", "node-a", tmp_path)


def test_one_failing_nvml_call_costs_only_its_field(profile_copy, tmp_path, gpu_fields):
    def sicken(data):
        data["gpus"]["overrides"] = {
            3: {
                "errors": {"nvmlDeviceGetVbiosVersion": "GPU_IS_LOST"},
                "ecc": {"uncorrected_volatile": 2},
            }
        }

    sim = Simulation(str(profile_copy("dgx-h100", sicken)), "node-a", tmp_path / "work")
    facts = collect_all(sim.sources())
    sick, healthy = gpu_fields(facts, 3), gpu_fields(facts, 2)

    assert sick["vbios_version"].status == "error"
    assert sick["vbios_version"].error == "GPU is lost"
    assert sick["ecc_uncorrected_volatile"].value == 2
    assert sick["ecc_mode_current"].value is True  # merged with the template's ecc section
    others = {n: r.status for n, r in sick.items() if n != "vbios_version"}
    assert others == {n: r.status for n, r in healthy.items() if n != "vbios_version"}
    assert healthy["vbios_version"].value == "96.00.89.00.01"
    assert healthy["ecc_uncorrected_volatile"].value == 0


def test_links_down_on_one_gpu_show_as_fewer_links_up(profile_copy, tmp_path):
    def degrade(data):
        data["gpus"]["overrides"] = {0: {"nvlink": {"links_up": 16}}}

    sim = Simulation(str(profile_copy("dgx-h100", degrade)), "node-a", tmp_path / "work")
    facts = collect_all(sim.sources())
    assert facts["gpus[0].nvlink_links_up"].value == 16
    assert facts["gpus[0].nvlink_links_total"].value == 18


def test_an_unloaded_driver_gives_driver_errors_and_no_gpus(profile_copy, tmp_path):
    def unload(data):
        data["driver"]["loaded"] = False

    sim = Simulation(str(profile_copy("dgx-h100", unload)), "node-a", tmp_path / "work")
    facts = collect_all(sim.sources())

    for name in ("driver_version", "nvml_version", "cuda_driver_version"):
        assert facts[f"driver.{name}"].error == "Driver Not Loaded"
    assert facts["driver.kernel_module_flavour"].error == "nvidia kernel module not loaded"
    assert not any(p.startswith("gpus[") for p in facts)
    assert facts["host.hostname"].value == "node-a"


def test_a_profile_boot_id_wins_over_the_derived_one(profile_copy, tmp_path):
    def pin(data):
        data["host"]["boot_id"] = "0c0ffee0-0000-4000-8000-000000000001"

    sim = Simulation(str(profile_copy("l4", pin)), "node-a", tmp_path / "work")
    assert (
        collect_all(sim.sources())["host.boot_id"].value == "0c0ffee0-0000-4000-8000-000000000001"
    )


def test_a_library_the_profile_does_not_know_has_a_failed_version(simulate):
    sim = simulate("l4")
    stray = sim.sources().host_root / "usr/lib/x86_64-linux-gnu/libcudart.so.11.0"
    stray.write_bytes(b"")
    facts = collect_all(sim.sources())

    paths = {r.value: p for p, r in facts.items() if p.endswith(".path")}
    version = facts[paths["/usr/lib/x86_64-linux-gnu/libcudart.so.11.0"].replace("path", "version")]
    assert version.status == "error" and "gives no cudart version" in version.error


def test_sources_carry_the_node_object_facts(simulate):
    sources = simulate("hgx-a100", "gke-node").sources()
    assert sources.node["host.cloud_provider"].value == "gcp"
    assert "host.cloud_provider" not in simulate("gb200", "onprem").sources().node


def test_an_upgrade_without_a_reboot_leaves_the_old_kernel_module_loaded(
    profile_copy, write_yaml, tmp_path
):
    path = profile_copy("dgx-h100")
    sim = Simulation(str(path), "node-a", tmp_path / "work")
    before = collect_all(sim.sources())
    assert before["driver.kernel_module_version"].value == "580.173.02"  # the library's

    data = yaml.safe_load(path.read_text())
    data["driver"]["version"] = "580.211.01"  # the new user-space library ...
    data["driver"]["kernel_module_version"] = "580.173.02"  # ... beside the module still loaded
    write_yaml(path, data)
    facts = collect_all(sim.sources())

    assert facts["driver.driver_version"].value == "580.211.01"
    assert facts["driver.kernel_module_version"].value == "580.173.02"
    assert facts["driver.modules[0].name"].value == "nvidia"
    assert facts["driver.modules[0].version"].value == "580.173.02"


def test_the_simulated_host_shows_the_profiles_kernel_and_units(profile_copy, tmp_path):
    def edit(data):
        data["host"].update(
            kernel_cmdline="BOOT_IMAGE=/boot/vmlinuz ro iommu=pt",
            kernel_modules=["efa", "overlay"],
            sysctl={"vm.max_map_count": "1048576"},
            systemd_units={
                "containerd.service": {
                    "fragment_path": "/usr/lib/systemd/system/containerd.service",
                    "package_version": "2.1.4-1",
                },
                "kubelet.service": {
                    "fragment_path": "/etc/systemd/system/kubelet.service",
                    "enabled": False,
                    "running": False,
                },
            },
        )
        data["driver"]["modules"] = {"nvidia": {"NVreg_EnableGpuFirmware": "18"}}

    sim = Simulation(str(profile_copy("l4", edit)), "node-a", tmp_path / "work")
    facts = collect_all(sim.sources())

    assert facts["host.kernel_cmdline"].value == "BOOT_IMAGE=/boot/vmlinuz ro iommu=pt"
    assert facts["host.kernel_modules"].value == "efa nvidia overlay"
    assert facts["host.sysctls[2].name"].value == "vm.max_map_count"
    assert facts["host.sysctls[2].value"].value == "1048576"
    assert facts["host.sysctls[0].value"].status == "not_supported"  # vm.swappiness: not given
    assert facts["driver.modules[0].parameters"].value == '{"NVreg_EnableGpuFirmware":"18"}'
    units = {p: r.value for p, r in facts.items() if p.startswith("host.systemd_units")}
    assert units == {
        "host.systemd_units[0].name": "containerd.service",
        "host.systemd_units[0].fragment_path": "/usr/lib/systemd/system/containerd.service",
        "host.systemd_units[0].unit_file_state": "enabled",
        "host.systemd_units[0].running": True,
        "host.systemd_units[0].package_version": "2.1.4",
        "host.systemd_units[1].name": "docker.service",
        "host.systemd_units[1].fragment_path": None,
        "host.systemd_units[1].unit_file_state": None,
        "host.systemd_units[1].running": None,
        "host.systemd_units[1].package_version": None,
        "host.systemd_units[2].name": "kubelet.service",
        "host.systemd_units[2].fragment_path": "/etc/systemd/system/kubelet.service",
        "host.systemd_units[2].unit_file_state": "disabled",
        "host.systemd_units[2].running": False,
        "host.systemd_units[2].package_version": None,
    }
