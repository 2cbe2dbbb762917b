"""containerd, docker and kubelet as systemd units, from the files a container with the
host's root mounted can read: unit files, enable links, cgroups, the dpkg database."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb.agent.collect import dpkg, systemd
from plumb.facts import Reading, flatten, unflatten

UNIT_WITH_INSTALL = (
    "[Unit]\nDescription=containerd container runtime\n\n[Service]\n"
    "ExecStart=/usr/bin/containerd\n\n[Install]\nWantedBy=multi-user.target\n"
)
UNIT_WITHOUT_INSTALL = "[Unit]\nDescription=kubelet\n\n[Service]\nExecStart=/usr/bin/kubelet\n"
DPKG_STATUS = (
    "Package: containerd.io\nStatus: install ok installed\nVersion: 1.7.27-1\n\n"
    "Package: docker-ce\nStatus: deinstall ok config-files\n"
    "Version: 5:27.3.1-1~ubuntu.24.04~noble\n\n"
    "Package: kubelet\nStatus: install ok installed\nVersion: 1.33.4-1.1\n"
)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _link(root: Path, name: str, target: str) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).symlink_to(target)


def _unit(facts: dict[str, Reading], unit: str) -> dict[str, Reading]:
    index = list(systemd.UNITS).index(unit)
    prefix = f"host.systemd_units[{index}]."
    assert facts[prefix + "name"] == Reading.ok(unit)
    return {p.removeprefix(prefix): r for p, r in facts.items() if p.startswith(prefix)}


def test_an_enabled_running_unit_from_a_package(tmp_path):
    _write(
        tmp_path,
        {
            "usr/lib/systemd/system/containerd.service": UNIT_WITH_INSTALL,
            "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
            "sys/fs/cgroup/system.slice/containerd.service/cgroup.procs": "38444\n",
            "var/lib/dpkg/status": DPKG_STATUS,
        },
    )
    # `systemctl enable` links with an absolute path: the host's, not the agent's.
    _link(
        tmp_path,
        "etc/systemd/system/multi-user.target.wants/containerd.service",
        "/usr/lib/systemd/system/containerd.service",
    )
    facts = systemd.collect(tmp_path)

    assert _unit(facts, "containerd.service") == {
        "name": Reading.ok("containerd.service"),
        "fragment_path": Reading.ok("/usr/lib/systemd/system/containerd.service"),
        "unit_file_state": Reading.ok("enabled"),
        "running": Reading.ok(True),
        "package_version": Reading.ok("1.7.27"),
    }
    assert flatten(unflatten(facts)) == facts


def test_a_unit_with_no_unit_file_is_not_supported_throughout(tmp_path):
    _write(tmp_path, {"var/lib/dpkg/status": DPKG_STATUS})
    docker = _unit(systemd.collect(tmp_path), "docker.service")
    # docker-ce's files remain but the package is removed: no version either.
    assert {key: r.status for key, r in docker.items() if key != "name"} == {
        "fragment_path": "not_supported",
        "unit_file_state": "not_supported",
        "running": "not_supported",
        "package_version": "not_supported",
    }


def test_a_masked_unit_is_a_link_to_dev_null(tmp_path):
    _write(
        tmp_path,
        {
            "usr/lib/systemd/system/docker.service": UNIT_WITH_INSTALL,
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        },
    )
    _link(tmp_path, "etc/systemd/system/docker.service", "/dev/null")
    docker = _unit(systemd.collect(tmp_path), "docker.service")
    assert docker["fragment_path"] == Reading.ok("/etc/systemd/system/docker.service")
    assert docker["unit_file_state"] == Reading.ok("masked")
    assert docker["running"] == Reading.ok(False)


@pytest.mark.parametrize(
    ("text", "state"), [(UNIT_WITHOUT_INSTALL, "static"), (UNIT_WITH_INSTALL, "disabled")]
)
def test_an_unlinked_unit_is_static_without_an_install_section_else_disabled(tmp_path, text, state):
    _write(
        tmp_path,
        {
            "lib/systemd/system/kubelet.service": text,
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        },
    )
    kubelet = _unit(systemd.collect(tmp_path), "kubelet.service")
    assert kubelet["fragment_path"] == Reading.ok("/lib/systemd/system/kubelet.service")
    assert kubelet["unit_file_state"] == Reading.ok(state)


def test_an_etc_alias_resolves_to_its_target_inside_the_host_root(tmp_path):
    _write(tmp_path, {"opt/kube/kubelet.service": UNIT_WITH_INSTALL})
    _link(tmp_path, "etc/systemd/system/kubelet.service", "/opt/kube/kubelet.service")
    kubelet = _unit(systemd.collect(tmp_path), "kubelet.service")
    assert kubelet["fragment_path"] == Reading.ok("/opt/kube/kubelet.service")
    assert kubelet["unit_file_state"] == Reading.ok("disabled")


def test_a_unit_in_another_slice_on_cgroup_v1_is_found_running(tmp_path):
    # EKS puts kubelet and containerd in runtime.slice; v1 keeps systemd's own hierarchy.
    _write(
        tmp_path,
        {
            "etc/systemd/system/kubelet.service": UNIT_WITH_INSTALL,
            "sys/fs/cgroup/systemd/runtime.slice/kubelet.service/cgroup.procs": "4242\n",
        },
    )
    assert _unit(systemd.collect(tmp_path), "kubelet.service")["running"] == Reading.ok(True)


def test_a_unit_whose_cgroup_is_empty_is_not_running(tmp_path):
    _write(
        tmp_path,
        {
            "etc/systemd/system/kubelet.service": UNIT_WITH_INSTALL,
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            "sys/fs/cgroup/system.slice/kubelet.service/cgroup.procs": "",
        },
    )
    assert _unit(systemd.collect(tmp_path), "kubelet.service")["running"] == Reading.ok(False)


def test_without_a_cgroup_filesystem_running_is_an_error(tmp_path):
    _write(tmp_path, {"etc/systemd/system/kubelet.service": UNIT_WITH_INSTALL})
    assert _unit(systemd.collect(tmp_path), "kubelet.service")["running"] == Reading.failed(
        "no systemd cgroup hierarchy under /sys/fs/cgroup"
    )


def test_without_a_dpkg_database_package_versions_are_not_supported(tmp_path):
    _write(tmp_path, {"usr/lib/systemd/system/containerd.service": UNIT_WITH_INSTALL})
    containerd = _unit(systemd.collect(tmp_path), "containerd.service")
    assert containerd["package_version"] == Reading.not_supported()


@pytest.mark.parametrize(
    ("version", "upstream"),
    [
        ("5:27.3.1-1~ubuntu.24.04~noble", "27.3.1"),
        ("1.7.12-0ubuntu2~22.04.1", "1.7.12"),
        ("1.33.4-1.1", "1.33.4"),
        ("1:550.54.15-1", "550.54.15"),
        ("2.0.2", "2.0.2"),
    ],
)
def test_a_debian_version_loses_its_epoch_and_revision(version, upstream):
    assert dpkg.upstream(version) == upstream
