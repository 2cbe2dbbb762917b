"""Host facts read from files under the host root (/proc, /sys, /etc), plus the node's facts.

Reading files rather than calling `uname` or `hostname` lets the agent describe the host from
inside a container (root "/host") and lets simulation describe a node that is a directory.
The kernel's facts (`kernel`) and the container stack's systemd units (`systemd`) come from
modules beside this one.
"""

from __future__ import annotations

import logging
import platform
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from plumb.agent.collect import dpkg, kernel, systemd
from plumb.agent.collect.files import Failed, NotSupported, first_line, read
from plumb.facts import Reading

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = ["collect", "parse_os_release"]

log = logging.getLogger(__name__)

_OS_RELEASE_FILES = ("etc/os-release", "usr/lib/os-release")
_OS_RELEASE_KEYS = {"os_id": "ID", "os_version_id": "VERSION_ID", "os_pretty_name": "PRETTY_NAME"}
_FABRIC_MANAGER_PACKAGES = ("nvidia-fabricmanager", "nvidia-fabric-manager")


def collect(sources: Sources) -> dict[str, Reading]:
    """host.* facts, the kernel's and the systemd units', the driver's kernel module flavour,
    version and modules, the fabric manager version, and the node's facts (`sources.node`,
    which win over the host's)."""
    root = sources.host_root
    out = {
        "host.hostname": read(lambda: first_line(root / "etc/hostname")),
        "host.boot_id": read(lambda: first_line(root / "proc/sys/kernel/random/boot_id")),
        "host.kernel": read(lambda: first_line(root / "proc/sys/kernel/osrelease")),
        "host.architecture": read(lambda: _architecture(root)),
        "driver.kernel_module_flavour": read(lambda: _module_flavour(root)),
        "driver.fabric_manager_version": read(lambda: _fabric_manager_version(root)),
    }
    try:
        os_release = _os_release(root)
    except OSError as exc:
        failed = Reading.failed(f"cannot read os-release: {exc.strerror or exc}")
        out |= {f"host.{name}": failed for name in _OS_RELEASE_KEYS}
    else:
        for name, key in _OS_RELEASE_KEYS.items():
            out[f"host.{name}"] = _known(os_release.get(key))
    out |= kernel.collect(root) | systemd.collect(root)
    out.update(sources.node)
    return out


def _known(value: str | None) -> Reading:
    return Reading.ok(value) if value else Reading.not_supported()


def _architecture(root: Path) -> str:
    # /proc/sys/kernel/arch (Linux >= 6.1) names the host's machine even from a foreign image.
    arch = root / "proc/sys/kernel/arch"
    return first_line(arch) if arch.exists() else platform.machine()


def _os_release(root: Path) -> dict[str, str]:
    for name in _OS_RELEASE_FILES:
        path = root / name
        if path.exists():
            return parse_os_release(path.read_text())
    raise FileNotFoundError(2, "No such file or directory", str(root / _OS_RELEASE_FILES[0]))


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value pairs of an os-release file, shell quoting removed, comments skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        try:
            words = shlex.split(value)
        except ValueError:  # unbalanced quotes: keep the raw value rather than drop the key
            words = [value.strip("\"'")]
        out[key.strip()] = " ".join(words)
    return out


def _module_flavour(root: Path) -> str:
    """ "open" or "proprietary": the open module says so in its banner and does not taint with P."""
    version = root / "proc/driver/nvidia/version"
    taint = root / "sys/module/nvidia/taint"
    if version.exists() and "Open Kernel Module" in version.read_text():
        return "open"
    if taint.exists():
        return "proprietary" if "P" in taint.read_text() else "open"
    if version.exists():
        return "proprietary"
    raise Failed("nvidia kernel module not loaded")


def _fabric_manager_version(root: Path) -> str:
    """The installed fabric manager package's version (dpkg); absent on hosts without NVSwitch."""
    for package, version in (dpkg.installed(root) or {}).items():
        if package.startswith(_FABRIC_MANAGER_PACKAGES):
            return dpkg.upstream(version)  # 1:550.54.15-1 is 550.54.15
    raise NotSupported
