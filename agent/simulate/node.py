"""A simulated GPU node: a profile turned into the Sources the real collectors read.

The host side is materialised as files under a work directory (proc, sys, etc, library files),
so the host, CUDA and NCCL collectors run unchanged; NVML is a FakeNvml. Editing the profile
file while the agent runs changes the node, which is how demos and tests make facts drift. The
file may also be a real capture (`nvidia-smi -q -x`, a mock-NVML config): it has no host, so
nothing is materialised and the host-side collectors report not_supported.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from pathlib import Path

from plumb.agent.collect import Sources
from plumb.agent.collect.systemd import UNITS
from plumb.agent.collect.xid import XidLog
from plumb.agent.simulate.capture import NO_HOST
from plumb.agent.simulate.events import XidSchedule
from plumb.agent.simulate.nvml import FakeNvml
from plumb.agent.simulate.profile import (
    DriverSpec,
    Profile,
    ProfileError,
    profile_path,
    read_profile,
)
from plumb.facts import Reading

__all__ = ["Simulation"]

log = logging.getLogger(__name__)

_BOOT_NAMESPACE = uuid.UUID("0f4b8c2e-1d7a-4e39-b6a5-8c3f2e9d1a47")


class Simulation:
    """A simulated node from a profile; re-reads the profile file when it changes.

    `xids`, when given, is the log an XidWatcher on this node's NVML fills: its facts then
    carry the XIDs the profile schedules."""

    def __init__(
        self, profile: str, node_name: str, workdir: Path, xids: XidLog | None = None
    ) -> None:
        self.node_name = node_name
        self.profile_path = profile_path(profile)
        self._root = Path(workdir) / "host"
        self._xids = xids
        self._schedule = XidSchedule()  # the node's clock: profile XIDs are due from now
        self._stamp = self._file_stamp()
        self._apply(read_profile(self.profile_path))  # the first load must succeed

    def profile(self) -> Profile:
        """The profile the node follows now (reloaded when the file changed)."""
        self.sources()
        return self._profile

    def sources(self) -> Sources:
        """Sources for the node as the profile describes it now (reloaded when the file changed;
        an invalid edit logs a warning and keeps the last good profile)."""
        stamp = self._file_stamp()
        if stamp != self._stamp:
            self._stamp = stamp  # warn once per bad edit, not on every collection
            try:
                self._apply(read_profile(self.profile_path))
            except ProfileError as exc:
                log.warning(
                    "profile invalid, keeping the last good one",
                    extra={"profile": str(self.profile_path), "error": str(exc)},
                )
            else:
                log.info("profile reloaded", extra={"profile": str(self.profile_path)})
        return self._sources

    def _file_stamp(self) -> tuple[int, int, int, int] | None:
        try:
            st = self.profile_path.stat()
        except OSError:
            return None  # read_profile reports why
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _apply(self, profile: Profile) -> None:
        nvml = FakeNvml(profile, self.node_name, self._schedule)  # validates every GPU first
        self._materialise(profile)
        self._schedule.plan(profile.xids)
        if profile.host is None:
            log.info(
                "no host in the profile",
                extra={"profile": str(self.profile_path), "reason": NO_HOST},
            )
        self._profile = profile
        self._sources = Sources(
            nvml=nvml,
            host_root=self._root,
            library_version=lambda kind, path: self._library_version(profile, kind, path),
            node=_node_facts(profile),
            without=frozenset() if profile.host else frozenset({"host", "cuda", "nccl"}),
            xids=self._xids,
        )

    def _library_version(self, profile: Profile, kind: str, path: Path) -> str:
        host_path = "/" + str(path.relative_to(self._root))
        versions = profile.cuda.runtimes if kind == "cudart" else profile.nccl
        if host_path not in versions:
            raise LookupError(f"{host_path}: the profile gives no {kind} version")
        return versions[host_path]

    def _materialise(self, profile: Profile) -> None:
        """Write the host files the collectors read; the old tree goes, so removals show."""
        if self._root.exists():
            shutil.rmtree(self._root)
        self._root.mkdir(parents=True)
        host = profile.host
        if host is None:
            return  # a capture: nothing is known of the host, so nothing is made up
        boot_id = host.boot_id or str(uuid.uuid5(_BOOT_NAMESPACE, self.node_name))
        files = {
            "etc/hostname": self.node_name,
            "etc/os-release": "".join(
                f'{key}="{_quoted(value)}"\n' for key, value in host.os_release.model_dump().items()
            ),
            "proc/sys/kernel/osrelease": host.kernel,
            "proc/sys/kernel/arch": host.architecture,
            "proc/sys/kernel/random/boot_id": boot_id,
        }
        files |= _kernel_files(profile)
        unit_files, links = _unit_files(profile)
        files |= unit_files
        if status := _dpkg_status(profile):
            files["var/lib/dpkg/status"] = status
        if profile.cuda.toolkit_version:
            files["usr/local/cuda/version.json"] = json.dumps(
                {"cuda": {"name": "CUDA SDK", "version": profile.cuda.toolkit_version}}
            )
        for library in [*profile.cuda.runtimes, *profile.nccl]:
            files[library.lstrip("/")] = ""
        for relative, text in files.items():
            path = self._root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n" if text else "")
        for relative, target in links.items():  # absolute host paths, as systemctl links them
            path = self._root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target)


def _kernel_files(profile: Profile) -> dict[str, str]:
    """/proc/cmdline, /proc/modules, the sysctls and the NVIDIA modules' files."""
    host, driver = profile.host, profile.driver
    files = {f"proc/sys/{name.replace('.', '/')}": value for name, value in host.sysctl.items()}
    if host.kernel_cmdline is not None:
        files["proc/cmdline"] = host.kernel_cmdline
    modules = list(host.kernel_modules or [])
    if driver.loaded:
        module_version = driver.kernel_module_version or driver.version
        files["proc/driver/nvidia/version"] = _nvrm_banner(profile.host.architecture, driver)
        # The open module taints only as out-of-tree (O) and unsigned (E); binary adds P.
        files["sys/module/nvidia/taint"] = "OE" if driver.kernel_module_flavour == "open" else "POE"
        for module, parameters in driver.modules.items():
            files[f"sys/module/{module}/version"] = module_version
            for name, value in parameters.items():
                files[f"sys/module/{module}/parameters/{name}"] = value
        modules += driver.modules
    if host.kernel_modules is not None:
        # name size refcount dependencies state address, as the kernel lists them
        files["proc/modules"] = "\n".join(f"{m} 16384 0 - Live 0x0000000000000000" for m in modules)
    return files


def _unit_files(profile: Profile) -> tuple[dict[str, str], dict[str, str]]:
    """The units' files, cgroups (v2) and enable links (path -> absolute host target)."""
    units = profile.host.systemd_units
    files = (
        {"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids"} if units else {}
    )
    links = {}
    for unit, spec in units.items():
        binary = unit.removesuffix(".service")
        files[spec.fragment_path.lstrip("/")] = (
            f"[Unit]\nDescription={binary}\n\n[Service]\nExecStart=/usr/bin/{binary}\n\n"
            "[Install]\nWantedBy=multi-user.target"
        )
        if spec.enabled:
            links[f"etc/systemd/system/multi-user.target.wants/{unit}"] = spec.fragment_path
        if spec.running:
            files[f"sys/fs/cgroup/system.slice/{unit}/cgroup.procs"] = "1234"
    return files, links


def _dpkg_status(profile: Profile) -> str:
    """/var/lib/dpkg/status for the packages the profile names (fabric manager, units)."""
    packages = {}
    if version := profile.driver.fabric_manager_version:
        packages[f"nvidia-fabricmanager-{version.split('.')[0]}"] = f"{version}-1"
    for unit, spec in profile.host.systemd_units.items():
        if spec.package_version:
            packages[spec.package or UNITS[unit][0]] = spec.package_version
    return "\n".join(
        f"Package: {name}\nStatus: install ok installed\nVersion: {version}\n"
        for name, version in packages.items()
    )


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _nvrm_banner(arch: str, driver: DriverSpec) -> str:
    """/proc/driver/nvidia/version as the real modules word it: the loaded module's version."""
    version = driver.kernel_module_version or driver.version
    if driver.kernel_module_flavour == "open":
        module = (
            f"NVIDIA UNIX Open Kernel Module for {arch}  {version}  Release Build  "
            "(dvs-builder@U16-T02-35-3)"
        )
    else:
        module = f"NVIDIA UNIX {arch} Kernel Module  {version}"
    return (
        f"NVRM version: {module}  Thu Oct 16 22:04:03 UTC 2025\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)"
    )


def _node_facts(profile: Profile) -> dict[str, Reading]:
    """What the agent would learn from the Kubernetes Node object: runtime, kubelet, cloud."""
    host = profile.host
    if host is None:
        return {}
    facts = {
        "host.container_runtime": host.container_runtime,
        "host.container_runtime_version": host.container_runtime_version,
        "host.kubelet_version": host.kubelet_version,
    }
    if host.cloud:
        facts |= {
            "host.cloud_provider": host.cloud.provider,
            "host.instance_type": host.cloud.instance_type,
            "host.region": host.cloud.region,
            "host.zone": host.cloud.zone,
        }
    return {path: Reading.ok(value) for path, value in facts.items()}
