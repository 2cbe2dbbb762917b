"""Host facts read from files under the host root (/proc, /sys, /etc), plus the node's facts.

Reading files rather than calling `uname` or `hostname` lets the agent describe the host from
inside a container (root "/host") and lets simulation describe a node that is a directory.
"""

from __future__ import annotations

import logging
import platform
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from plumb.facts import Reading

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = ["collect", "parse_os_release"]

log = logging.getLogger(__name__)

_OS_RELEASE_FILES = ("etc/os-release", "usr/lib/os-release")
_OS_RELEASE_KEYS = {"os_id": "ID", "os_version_id": "VERSION_ID", "os_pretty_name": "PRETTY_NAME"}
_FABRIC_MANAGER_PACKAGES = ("nvidia-fabricmanager", "nvidia-fabric-manager")


class _NotSupported(Exception):
    """The host has nothing to report for this fact (e.g. no fabric manager without NVSwitch)."""


class _Failed(Exception):
    """The fact should be there but is not; the message says why."""


def collect(sources: Sources) -> dict[str, Reading]:
    """host.* facts, the driver's kernel module flavour and fabric manager version, and the
    node's facts (`sources.node`, which win over the host's)."""
    root = sources.host_root
    out = {
        "host.hostname": _read(lambda: _first_line(root / "etc/hostname")),
        "host.boot_id": _read(lambda: _first_line(root / "proc/sys/kernel/random/boot_id")),
        "host.kernel": _read(lambda: _first_line(root / "proc/sys/kernel/osrelease")),
        "host.architecture": _read(lambda: _architecture(root)),
        "driver.kernel_module_flavour": _read(lambda: _module_flavour(root)),
        "driver.fabric_manager_version": _read(lambda: _fabric_manager_version(root)),
    }
    try:
        os_release = _os_release(root)
    except OSError as exc:
        failed = Reading.failed(f"cannot read os-release: {exc.strerror or exc}")
        out |= {f"host.{name}": failed for name in _OS_RELEASE_KEYS}
    else:
        for name, key in _OS_RELEASE_KEYS.items():
            out[f"host.{name}"] = _known(os_release.get(key))
    out.update(sources.node)
    return out


def _read(call: Callable[[], str]) -> Reading:
    try:
        return Reading.ok(call())
    except _NotSupported:
        return Reading.not_supported()
    except _Failed as exc:
        return Reading.failed(str(exc))
    except OSError as exc:
        return Reading.failed(f"cannot read {exc.filename}: {exc.strerror or exc}")
    except Exception as exc:  # one field's failure must never lose the others
        return Reading.failed(f"{type(exc).__name__}: {exc}")


def _known(value: str | None) -> Reading:
    return Reading.ok(value) if value else Reading.not_supported()


def _first_line(path: Path) -> str:
    return path.read_text().strip().splitlines()[0].strip()


def _architecture(root: Path) -> str:
    # /proc/sys/kernel/arch (Linux >= 6.1) names the host's machine even from a foreign image.
    arch = root / "proc/sys/kernel/arch"
    return _first_line(arch) if arch.exists() else platform.machine()


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
    raise _Failed("nvidia kernel module not loaded")


def _fabric_manager_version(root: Path) -> str:
    """The installed fabric manager package's version (dpkg); absent on hosts without NVSwitch."""
    status = root / "var/lib/dpkg/status"
    if not status.exists():
        raise _NotSupported
    for stanza in status.read_text().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        package = fields.get("Package", "")
        if package.startswith(_FABRIC_MANAGER_PACKAGES) and "installed" in fields.get(
            "Status", ""
        ).split(" "):
            return fields.get("Version", "").split(":")[-1].split("-")[0]  # 1:550.54.15-1
    raise _NotSupported
