"""The kernel collector reads a host root's /proc and /sys: the NVIDIA module's own version
beside NVML's, the command line, the loaded modules, the NVIDIA modules' parameters and the
sysctl subset. Expected values are written from the files each test writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plumb.agent.collect import kernel
from plumb.facts import MAX_VALUE_CHARS, Reading, flatten, unflatten

# The two banner forms the brief quotes (open and proprietary modules), and an aarch64 one.
OPEN_580 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build  "
    "(dvs-builder@U22-I3-AF03-09-1)  Thu Oct 16 22:04:03 UTC 2025\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
)
PROPRIETARY_535 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n"
    "GCC version:  gcc version 12.2.0 (Ubuntu 12.2.0-3ubuntu1)\n"
)
OPEN_AARCH64 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build  "
    "(dvs-builder@U16-I2-C04-6-2)  Thu Jan 30 17:58:11 UTC 2025\n"
)
# /proc/modules lines: name size refcount dependencies state address (taint).
PROC_MODULES = (
    "nvidia_uvm 1802240 0 - Live 0xffffffffc1a00000 (POE)\n"
    "nvidia_modeset 1355776 1 nvidia_drm, Live 0xffffffffc1870000 (POE)\n"
    "nvidia 56500224 2 nvidia_uvm,nvidia_modeset, Live 0xffffffffbe000000 (POE)\n"
    "efa 147456 0 - Live 0xffffffffc0c40000\n"
    "ib_core 454656 2 efa,ib_uverbs, Live 0xffffffffc0b40000\n"
    "xt_MASQUERADE 16384 1 - Live 0xffffffffc0a20000\n"
)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _sysctl(facts: dict[str, Reading], name: str) -> Reading:
    (index,) = [p for p, r in facts.items() if p.endswith(".name") and r.value == name]
    return facts[index.removesuffix(".name") + ".value"]


@pytest.mark.parametrize(
    ("banner", "version"),
    [(OPEN_580, "580.105.08"), (PROPRIETARY_535, "535.54.03"), (OPEN_AARCH64, "570.86.15")],
)
def test_the_kernel_module_version_comes_from_the_nvrm_banner(tmp_path, banner, version):
    _write(tmp_path, {"proc/driver/nvidia/version": banner})
    assert kernel.collect(tmp_path)["driver.kernel_module_version"] == Reading.ok(version)


def test_without_the_nvidia_module_its_version_is_an_error(tmp_path):
    facts = kernel.collect(tmp_path)
    assert facts["driver.kernel_module_version"] == Reading.failed(
        "nvidia kernel module not loaded"
    )
    assert not any(p.startswith("driver.modules") for p in facts)


def test_a_banner_without_a_version_says_what_it_read(tmp_path):
    _write(tmp_path, {"proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Kernel Module\n"})
    reading = kernel.collect(tmp_path)["driver.kernel_module_version"]
    assert reading.status == "error"
    assert "no version in /proc/driver/nvidia/version" in reading.error


def test_the_command_line_is_kept_as_the_kernel_has_it(tmp_path):
    cmdline = (
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-1024-aws root=PARTUUID=4a4b-01 ro "
        'nokaslr hugepages=5128 "dm=1 vroot none ro 1,0 4077568"\n'
    )
    _write(tmp_path, {"proc/cmdline": cmdline})
    assert kernel.collect(tmp_path)["host.kernel_cmdline"] == Reading.ok(
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-1024-aws root=PARTUUID=4a4b-01 ro nokaslr hugepages=5128 "
        '"dm=1 vroot none ro 1,0 4077568"'
    )


def test_a_command_line_too_long_for_the_wire_is_an_error_not_a_refused_message(tmp_path):
    _write(tmp_path, {"proc/cmdline": "quiet " * 700})  # 4,200 characters
    facts = kernel.collect(tmp_path)
    assert facts["host.kernel_cmdline"].status == "error"
    assert f"more than the {MAX_VALUE_CHARS}" in facts["host.kernel_cmdline"].error
    assert flatten(unflatten(facts)) == facts


def test_loaded_modules_are_one_sorted_list_of_names(tmp_path):
    _write(tmp_path, {"proc/modules": PROC_MODULES})
    assert kernel.collect(tmp_path)["host.kernel_modules"] == Reading.ok(
        "efa ib_core nvidia nvidia_modeset nvidia_uvm xt_MASQUERADE"
    )


def test_a_kernel_without_proc_modules_reports_none_supported(tmp_path):
    facts = kernel.collect(tmp_path)
    assert facts["host.kernel_modules"] == Reading.not_supported()
    assert facts["host.kernel_cmdline"] == Reading.not_supported()


def test_nvidia_modules_carry_their_version_and_every_parameter(tmp_path):
    _write(
        tmp_path,
        {
            "sys/module/nvidia/version": "580.105.08\n",
            "sys/module/nvidia/parameters/NVreg_EnableGpuFirmware": "18\n",
            "sys/module/nvidia/parameters/NVreg_RegistryDwords": "(null)\n",
            "sys/module/nvidia_uvm/version": "580.105.08\n",
            "sys/module/nvidia_uvm/parameters/uvm_disable_hmm": "N\n",
            "sys/module/nvidia_drm/parameters/modeset": "Y\n",  # declares no version
            "sys/module/nvidia_peermem/version": "580.105.08\n",  # has no parameters
            "sys/module/efa/version": "2.13.0g\n",  # not NVIDIA's: not listed
        },
    )
    facts = kernel.collect(tmp_path)
    modules = {p: r for p, r in facts.items() if p.startswith("driver.modules")}

    assert modules == {
        "driver.modules[0].name": Reading.ok("nvidia"),
        "driver.modules[0].version": Reading.ok("580.105.08"),
        "driver.modules[0].parameters": Reading.ok(
            '{"NVreg_EnableGpuFirmware":"18","NVreg_RegistryDwords":"(null)"}'
        ),
        "driver.modules[1].name": Reading.ok("nvidia_drm"),
        "driver.modules[1].version": Reading.not_supported(),
        "driver.modules[1].parameters": Reading.ok('{"modeset":"Y"}'),
        "driver.modules[2].name": Reading.ok("nvidia_peermem"),
        "driver.modules[2].version": Reading.ok("580.105.08"),
        "driver.modules[2].parameters": Reading.ok("{}"),
        "driver.modules[3].name": Reading.ok("nvidia_uvm"),
        "driver.modules[3].version": Reading.ok("580.105.08"),
        "driver.modules[3].parameters": Reading.ok('{"uvm_disable_hmm":"N"}'),
    }
    assert flatten(unflatten(facts)) == facts


def test_a_parameter_the_agent_may_not_read_is_null(tmp_path, monkeypatch):
    _write(
        tmp_path,
        {
            "sys/module/nvidia_drm/parameters/fbdev": "N\n",
            "sys/module/nvidia_drm/parameters/modeset": "Y\n",  # mode 0400 on real hosts
        },
    )
    secret = tmp_path / "sys/module/nvidia_drm/parameters/modeset"
    read_text = Path.read_text

    def refuse(self: Path, *args, **kwargs) -> str:
        if self == secret:
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)  # the tests run as root, which reads it
    reading = kernel.collect(tmp_path)["driver.modules[0].parameters"]
    assert json.loads(reading.value) == {"fbdev": "N", "modeset": None}


def test_sysctls_are_the_documented_subset_read_from_proc_sys(tmp_path):
    _write(
        tmp_path,
        {
            "proc/sys/vm/swappiness": "60\n",
            "proc/sys/vm/max_map_count": "262144\n",
            "proc/sys/kernel/numa_balancing": "1\n",
            "proc/sys/kernel/threads-max": "16512444\n",
            "proc/sys/fs/inotify/max_user_watches": "524288\n",
            "proc/sys/vm/dirty_ratio": "20\n",  # not in the subset
        },
    )
    facts = kernel.collect(tmp_path)

    assert _sysctl(facts, "vm.swappiness") == Reading.ok("60")
    assert _sysctl(facts, "vm.max_map_count") == Reading.ok("262144")
    assert _sysctl(facts, "kernel.numa_balancing") == Reading.ok("1")
    assert _sysctl(facts, "kernel.threads-max") == Reading.ok("16512444")
    assert _sysctl(facts, "fs.inotify.max_user_watches") == Reading.ok("524288")
    # Only the host's network namespace has it: a pod without hostNetwork sees no file.
    assert _sysctl(facts, "net.core.rmem_max") == Reading.not_supported()
    names = [r.value for p, r in facts.items() if p.startswith("host.sysctls[")]
    assert "vm.dirty_ratio" not in names
    assert len(kernel.SYSCTLS) <= 20  # each sysctl costs two stored rows per node


def test_a_sysctl_the_agent_may_not_read_is_an_error_naming_the_file(tmp_path, monkeypatch):
    _write(tmp_path, {"proc/sys/vm/swappiness": "60\n"})
    target = tmp_path / "proc/sys/vm/swappiness"
    read_text = Path.read_text

    def refuse(self: Path, *args, **kwargs) -> str:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)
    assert _sysctl(kernel.collect(tmp_path), "vm.swappiness") == Reading.failed(
        f"cannot read {target}: Permission denied"
    )
