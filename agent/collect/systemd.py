"""containerd, kubelet and docker as systemd units, read from files: the agent has no D-Bus.

What a container with the host's /etc, /usr, /sys and /var/lib/dpkg mounted can read, and how
each maps onto AICR's SystemD measurement (D-Bus unit properties):

- `fragment_path` (FragmentPath): the unit file found first on systemd's search path;
  not_supported when there is none (AICR's LoadState not-found), and then so is the rest.
- `unit_file_state` (UnitFileState): masked (a link to /dev/null), enabled (a link in an
  /etc/systemd/system/*.wants or *.requires folder, what `systemctl enable` makes),
  enabled-runtime (the same under /run), static (no [Install] section), else disabled.
- `running` (ActiveState active, SubState running): the unit's cgroup holds processes. A
  stopped and a failed unit both read false: telling them apart needs systemd itself.
- `package_version`: the upstream version of the unit's dpkg package; not_supported on hosts
  without a dpkg database (RPM, image-based) or with the binary installed by hand. The
  versions that are running come from the Node object (host.container_runtime_version,
  host.kubelet_version); the two differ after a package upgrade without a restart.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from plumb.agent.collect import dpkg
from plumb.agent.collect.files import Failed, NotSupported, failure, read
from plumb.facts import Reading

__all__ = ["UNITS", "UNIT_DIRS", "collect"]

# AICR's SystemD subtypes, each with the dpkg packages that ship it, most common first.
UNITS = {
    "containerd.service": ("containerd.io", "containerd"),
    "docker.service": ("docker-ce", "docker.io"),
    "kubelet.service": ("kubelet",),
}
# systemd's unit search path, highest precedence first (systemd.unit(5)).
UNIT_DIRS = (
    "etc/systemd/system",
    "run/systemd/system",
    "usr/local/lib/systemd/system",
    "usr/lib/systemd/system",
    "lib/systemd/system",
)
_ENABLE_DIRS = {"etc/systemd/system": "enabled", "run/systemd/system": "enabled-runtime"}
_INSTALL_KEYS = ("WantedBy=", "RequiredBy=", "UpheldBy=", "Alias=", "Also=")
_MAX_LINKS = 8  # symlink hops followed inside the root before giving up


def collect(root: Path) -> dict[str, Reading]:
    """host.systemd_units[] for each of UNITS, in that order."""
    try:
        packages: dict[str, str] | None | Exception = dpkg.installed(root)
    except OSError as exc:
        packages = exc
    out: dict[str, Reading] = {}
    for i, (unit, names) in enumerate(UNITS.items()):
        prefix = f"host.systemd_units[{i}]."
        readings = {"name": Reading.ok(unit), **_unit(root, unit)}
        readings["package_version"] = read(lambda names=names: _package(packages, names))
        out |= {prefix + key: reading for key, reading in readings.items()}
    return out


def _unit(root: Path, unit: str) -> dict[str, Reading]:
    """fragment_path, unit_file_state and running; all not_supported without a unit file."""
    try:
        found = _unit_file(root, unit)
    except OSError as exc:
        return dict.fromkeys(("fragment_path", "unit_file_state", "running"), failure(exc))
    if found is None:
        return dict.fromkeys(
            ("fragment_path", "unit_file_state", "running"), Reading.not_supported()
        )
    entry, resolved = found
    return {
        "fragment_path": Reading.ok(_host_path(root, resolved)),
        "unit_file_state": read(lambda: _state(root, unit, entry, resolved)),
        "running": read(lambda: _running(root, unit)),
    }


def _unit_file(root: Path, unit: str) -> tuple[Path, Path] | None:
    """(the unit's entry on the search path, the file it resolves to), or None."""
    for directory in UNIT_DIRS:
        entry = root / directory / unit
        if os.path.lexists(entry):
            return entry, _resolve(root, entry)
    return None


def _resolve(root: Path, path: Path) -> Path:
    """`path` with its links followed inside `root` (absolute targets are the host's paths),
    stopping at a link to /dev/null (a masked unit) or after _MAX_LINKS hops."""
    for _ in range(_MAX_LINKS):
        if not path.is_symlink():
            return path
        target = os.readlink(path)
        if target == "/dev/null":
            return path
        path = root / target.lstrip("/") if target.startswith("/") else path.parent / target
    return path


def _host_path(root: Path, path: Path) -> str:
    return str(PurePosixPath("/") / path.relative_to(root))


def _state(root: Path, unit: str, entry: Path, resolved: Path) -> str:
    if resolved.is_symlink():
        if os.readlink(resolved) == "/dev/null":
            return "masked"
        raise Failed(f"{_host_path(root, entry)}: more than {_MAX_LINKS} links deep")
    for directory, state in _ENABLE_DIRS.items():
        for kind in ("wants", "requires"):
            if any(os.path.lexists(d / unit) for d in (root / directory).glob(f"*.{kind}")):
                return state
    if not resolved.exists():
        raise Failed(f"{_host_path(root, entry)} links to a missing file")
    text = resolved.read_text(errors="replace")
    return "disabled" if _has_install_section(text) else "static"


def _has_install_section(text: str) -> bool:
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Install]" and line.startswith(_INSTALL_KEYS):
            return True
    return False


def _running(root: Path, unit: str) -> bool:
    """Whether the unit's cgroup (in any slice) or one below it holds a process; systemd removes
    a unit's cgroup when it stops."""
    cgroup = root / "sys/fs/cgroup"
    if (cgroup / "cgroup.controllers").exists():
        hierarchy = cgroup  # cgroup v2, unified
    elif (cgroup / "systemd").is_dir():
        hierarchy = cgroup / "systemd"  # v1 or hybrid: systemd's own named hierarchy
    else:
        raise Failed("no systemd cgroup hierarchy under /sys/fs/cgroup")
    tops = [hierarchy / unit, *hierarchy.glob(f"*.slice/{unit}")]
    tops += hierarchy.glob(f"*.slice/*.slice/{unit}")
    for top in tops:
        for directory, _, _ in os.walk(top):
            procs = Path(directory) / "cgroup.procs"
            if procs.exists() and procs.read_text().strip():
                return True
    return False


def _package(packages: dict[str, str] | None | Exception, names: tuple[str, ...]) -> str:
    if isinstance(packages, Exception):
        raise packages
    for name in names if packages is not None else ():
        if name in packages:
            return dpkg.upstream(packages[name])
    raise NotSupported
