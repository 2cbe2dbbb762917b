"""A bad profile is refused with a message that names the file and the failing field."""

from __future__ import annotations

import pytest

from plumb.agent.simulate.profile import ProfileError, load_profile, shipped_profiles


def _expect_error(path, *fragments):
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    message = str(caught.value)
    assert message.startswith(f"profile {path}: ")
    for fragment in fragments:
        assert fragment in message
    return message


def test_a_non_positive_gpu_count_names_the_field(profile_copy):
    path = profile_copy("l4", lambda d: d["gpus"].update(count=0))
    _expect_error(path, "gpus.count: Input should be greater than 0")


def test_an_unknown_key_is_refused(profile_copy):
    path = profile_copy("l4", lambda d: d["driver"].update(verison="1"))
    _expect_error(path, "driver.verison: Extra inputs are not permitted")


def test_a_bad_template_field_names_its_path(profile_copy):
    path = profile_copy("l4", lambda d: d["gpus"]["template"].update(architecture="fermi2"))
    _expect_error(path, "gpus.template.architecture", "not an NVML architecture name")


def test_a_bad_override_names_the_gpu_index(profile_copy):
    def edit(data):
        data["gpus"]["overrides"] = {0: {"nvlink": {"links_total": 18, "links_up": 19}}}

    _expect_error(profile_copy("l4", edit), "gpus.overrides.0.nvlink", "links_up exceeds")


def test_an_override_for_a_missing_gpu_is_refused(profile_copy):
    path = profile_copy(
        "l4", lambda d: d["gpus"].update(overrides={5: {"temperature_celsius": 90}})
    )
    _expect_error(path, "gpus.overrides.5: no such GPU (count is 1)")


def test_an_unknown_nvml_error_name_is_refused(profile_copy):
    def edit(data):
        data["gpus"]["template"]["errors"] = {"nvmlDeviceGetTemperature": "ON_FIRE"}

    _expect_error(profile_copy("l4", edit), "gpus.template.errors.nvmlDeviceGetTemperature")


def test_a_relative_library_path_is_refused(profile_copy):
    path = profile_copy("l4", lambda d: d.update(nccl={"lib/libnccl.so.2": "2.21.5"}))
    _expect_error(path, "nccl.lib/libnccl.so.2", "absolute path")


def test_invalid_yaml_is_reported(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("host: [unclosed\n")
    _expect_error(path, "invalid YAML")


def test_an_empty_file_is_reported(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    _expect_error(path, "(top level): Input should be a valid dictionary")


def test_an_unreadable_file_lists_the_shipped_profiles(tmp_path):
    message = _expect_error(tmp_path / "missing.yaml", "cannot read", "shipped profiles are")
    assert all(name in message for name in shipped_profiles())


def test_an_unknown_shipped_name_lists_the_shipped_profiles():
    with pytest.raises(ProfileError, match="unknown profile 'dgx-h900': shipped profiles are"):
        load_profile("dgx-h900")


def test_a_value_of_the_wrong_type_names_the_file_and_key(profile_copy):
    path = profile_copy("l4", lambda d: d["gpus"]["template"].update(temperature_celsius="hot"))
    _expect_error(path, "gpus.template.temperature_celsius: Input should be a valid integer")


def test_a_section_of_the_wrong_type_names_it(profile_copy):
    _expect_error(profile_copy("l4", lambda d: d.update(driver=["570"])), "driver: Input should")


def test_a_file_that_is_not_utf8_is_reported(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("host: {hostname: b\xe9ta}\n".encode("latin-1"))
    _expect_error(path, "not UTF-8 text (bad byte at offset 18); save it as UTF-8")


def test_a_sysctl_outside_the_agents_subset_is_refused(profile_copy):
    path = profile_copy("l4", lambda d: d["host"].update(sysctl={"vm.dirty_ratio": "20"}))
    _expect_error(path, "host.sysctl.vm.dirty_ratio", "not in the agent's sysctl subset")


def test_a_unit_the_agent_does_not_read_is_refused(profile_copy):
    units = {"crio.service": {"fragment_path": "/usr/lib/systemd/system/crio.service"}}
    path = profile_copy("l4", lambda d: d["host"].update(systemd_units=units))
    _expect_error(path, "host.systemd_units.crio.service", "not a unit the agent reads")


def test_a_unit_package_the_agent_does_not_look_for_is_refused(profile_copy):
    units = {
        "containerd.service": {
            "fragment_path": "/usr/lib/systemd/system/containerd.service",
            "package": "moby-containerd",
        }
    }
    path = profile_copy("l4", lambda d: d["host"].update(systemd_units=units))
    _expect_error(path, "systemd_units.containerd.service.package", "containerd.io, containerd")


def test_a_loaded_driver_without_the_nvidia_module_is_refused(profile_copy):
    path = profile_copy("l4", lambda d: d["driver"].update(modules={"nvidia_uvm": {}}))
    _expect_error(path, "driver", "a loaded driver has the nvidia module")


def test_a_unit_file_off_systemds_search_path_is_refused(profile_copy):
    units = {"kubelet.service": {"fragment_path": "/opt/kube/kubelet.service"}}
    path = profile_copy("l4", lambda d: d["host"].update(systemd_units=units))
    _expect_error(path, "kubelet.service.fragment_path", "/usr/lib/systemd/system")
