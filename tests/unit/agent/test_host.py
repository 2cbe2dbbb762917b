"""The host collector reads a host root's files, field by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb.agent.collect import Sources, host
from plumb.agent.collect.host import parse_os_release
from plumb.facts import Reading

OPEN_BANNER = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build"
PROPRIETARY_BANNER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar 5"


def _sources(root: Path, node=None) -> Sources:
    return Sources(nvml=None, host_root=root, library_version=_no_probe, node=node or {})


def _no_probe(kind: str, path: Path) -> str:
    raise AssertionError("not called")


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_os_release_values_lose_their_quotes_and_comments_are_skipped():
    text = (
        '# comment\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n'
        "PRETTY_NAME='Ubuntu 22.04 \"LTS\"'\n\nJUNK\n"
    )
    assert parse_os_release(text) == {
        "NAME": "Ubuntu",
        "VERSION_ID": "22.04",
        "ID": "ubuntu",
        "PRETTY_NAME": 'Ubuntu 22.04 "LTS"',
    }


def test_os_release_with_unbalanced_quotes_keeps_the_value():
    assert parse_os_release('ID="rhel\n')["ID"] == "rhel"


def test_host_facts_come_from_the_root(tmp_path):
    _write(
        tmp_path,
        {
            "etc/hostname": "gpu-7\n",
            "proc/sys/kernel/random/boot_id": "b00t\n",
            "proc/sys/kernel/osrelease": "6.8.0-45-generic\n",
            "proc/sys/kernel/arch": "aarch64\n",
            "usr/lib/os-release": (
                'ID=rhel\nVERSION_ID="9.4"\nPRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\n'
            ),
        },
    )
    facts = host.collect(_sources(tmp_path))

    assert facts["host.hostname"] == Reading.ok("gpu-7")
    assert facts["host.boot_id"] == Reading.ok("b00t")
    assert facts["host.kernel"] == Reading.ok("6.8.0-45-generic")
    assert facts["host.architecture"] == Reading.ok("aarch64")
    assert facts["host.os_id"] == Reading.ok("rhel")  # from the usr/lib fallback
    assert facts["host.os_version_id"] == Reading.ok("9.4")
    assert facts["host.os_pretty_name"] == Reading.ok("Red Hat Enterprise Linux 9.4 (Plow)")


def test_an_empty_root_fails_each_field_without_raising(tmp_path):
    facts = host.collect(_sources(tmp_path))

    assert facts["host.hostname"].status == "error"
    assert "etc/hostname" in facts["host.hostname"].error
    assert facts["host.os_id"].error.startswith("cannot read os-release")
    assert facts["host.architecture"].status == "ok"  # falls back to platform.machine()
    assert facts["driver.kernel_module_flavour"] == Reading.failed(
        "nvidia kernel module not loaded"
    )
    assert facts["driver.fabric_manager_version"] == Reading.not_supported()


def test_an_os_release_without_version_id_says_not_supported(tmp_path):
    _write(tmp_path, {"etc/os-release": "ID=arch\nPRETTY_NAME=Arch Linux\n"})
    facts = host.collect(_sources(tmp_path))
    assert facts["host.os_version_id"] == Reading.not_supported()
    assert facts["host.os_pretty_name"] == Reading.ok("Arch Linux")


@pytest.mark.parametrize(
    ("files", "flavour"),
    [
        (
            {"proc/driver/nvidia/version": OPEN_BANNER},
            "open",
        ),
        (
            {"proc/driver/nvidia/version": PROPRIETARY_BANNER},
            "proprietary",
        ),
        ({"sys/module/nvidia/taint": "POE\n"}, "proprietary"),
        ({"sys/module/nvidia/taint": "OE\n"}, "open"),
        (
            {
                "proc/driver/nvidia/version": PROPRIETARY_BANNER,
                "sys/module/nvidia/taint": "OE\n",
            },
            "open",
        ),
    ],
)
def test_the_kernel_module_flavour_is_recognised(tmp_path, files, flavour):
    _write(tmp_path, files)
    assert host.collect(_sources(tmp_path))["driver.kernel_module_flavour"] == Reading.ok(flavour)


def test_the_fabric_manager_version_comes_from_the_installed_package(tmp_path):
    _write(
        tmp_path,
        {
            "var/lib/dpkg/status": (
                "Package: nvidia-fabricmanager-535\nStatus: deinstall ok config-files\n"
                "Version: 535.104.05-1\n\n"
                "Package: libc6\nStatus: install ok installed\nVersion: 2.35-0ubuntu3\n"
                " multi-line: description\n\n"
                "Package: nvidia-fabricmanager-550\nStatus: install ok installed\n"
                "Version: 1:550.54.15-1\n"
            )
        },
    )
    facts = host.collect(_sources(tmp_path))
    assert facts["driver.fabric_manager_version"] == Reading.ok("550.54.15")


def test_node_facts_are_merged_and_win_over_the_host(tmp_path):
    _write(tmp_path, {"etc/hostname": "from-file"})
    node = {"host.hostname": Reading.ok("from-node"), "host.zone": Reading.ok("us-east-2b")}
    facts = host.collect(_sources(tmp_path, node))
    assert facts["host.hostname"] == Reading.ok("from-node")
    assert facts["host.zone"] == Reading.ok("us-east-2b")


def test_the_host_facts_include_the_kernel_and_the_container_stack_units(tmp_path):
    _write(
        tmp_path,
        {
            "proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic ro quiet\n",
            "proc/driver/nvidia/version": OPEN_BANNER,
            # No [Install] section: a static unit.
            "usr/lib/systemd/system/containerd.service": "[Service]\nExecStart=/usr/bin/ctr\n",
        },
    )
    facts = host.collect(_sources(tmp_path))

    assert facts["host.kernel_cmdline"] == Reading.ok(
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic ro quiet"
    )
    assert facts["driver.kernel_module_version"] == Reading.ok("550.54.15")
    assert facts["driver.kernel_module_flavour"] == Reading.ok("open")
    assert facts["host.systemd_units[0].name"] == Reading.ok("containerd.service")
    assert facts["host.systemd_units[0].fragment_path"] == Reading.ok(
        "/usr/lib/systemd/system/containerd.service"
    )
    assert facts["host.systemd_units[0].unit_file_state"] == Reading.ok("static")
