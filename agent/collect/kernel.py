"""Kernel facts from the host root: command line, loaded modules, the NVIDIA modules (version,
parameters), the kernel module's own version, and a documented sysctl subset.

Named to export as AICR's snapshot does: `host.kernel_cmdline` is OS.grub (split into
key=value tokens), `host.kernel_modules` OS.kmod (each name true), `host.sysctls` OS.sysctl
(keyed by /proc/sys path). AICR dumps every sysctl; Plumb keeps the few below, since each fact
costs a stored row per node.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from plumb.agent.collect.files import Failed, NotSupported, bounded, first_line, read
from plumb.facts import Reading

__all__ = ["SYSCTLS", "collect", "kernel_module_version"]

# The sysctl subset, by dotted name, each with why a GPU cluster cares. Only tunables that read
# the same from a pod as from the host: per-namespace ones (net.ipv4.*, net.core.somaxconn,
# kernel.shm*, kernel.pid_max since 6.14) would show the agent's own namespace and are left out.
SYSCTLS = (
    "vm.swappiness",  # kubelet runs with swap off; high values page out the job's host memory
    "vm.overcommit_memory",  # kubelet's protect-kernel-defaults wants 1; CUDA reserves big ranges
    "vm.max_map_count",  # large models and UCX/NCCL map many regions; 65530 is often too few
    "vm.nr_hugepages",  # huge pages reserved for GPUDirect, DPDK or UCX buffers
    "vm.zone_reclaim_mode",  # non-zero reclaims local memory rather than use the other socket's
    "vm.panic_on_oom",  # kubelet's protect-kernel-defaults wants 0
    "kernel.numa_balancing",  # page migration stalls GPU DMA to pinned memory; tuning guides set 0
    "kernel.panic",  # kubelet's protect-kernel-defaults wants 10 (reboot a panicked node)
    "kernel.panic_on_oops",  # kubelet's protect-kernel-defaults wants 1
    "kernel.threads-max",  # data-loader workers times threads per rank
    "fs.file-max",  # NCCL sockets, dataset shards and container overhead per node
    "fs.inotify.max_user_instances",  # kubelet and containers run out of the default 128
    "fs.inotify.max_user_watches",  # same, per watch
    # Only the initial network namespace has these: from a pod without hostNetwork the file is
    # absent (not_supported), never the pod's value.
    "net.core.rmem_max",  # caps NCCL's socket transport receive buffers
    "net.core.wmem_max",  # caps NCCL's socket transport send buffers
)

# The version in the banner: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
# 580.105.08  Release Build ..." or "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03
# Tue Jun  6 ...": the first dotted number standing alone (build hosts and times have none).
_VERSION_TOKEN = re.compile(r"(?<!\S)(\d+\.\d+(?:\.\d+)*)(?!\S)")
_NVIDIA_MODULES = "nvidia*"  # nvidia, nvidia_uvm, nvidia_modeset, nvidia_drm, nvidia_peermem...


def collect(root: Path) -> dict[str, Reading]:
    """host.kernel_cmdline, host.kernel_modules, host.sysctls[], driver.kernel_module_version
    and driver.modules[] from the files under `root`."""
    out = {
        "host.kernel_cmdline": read(lambda: _cmdline(root)),
        "host.kernel_modules": read(lambda: _loaded_modules(root)),
        "driver.kernel_module_version": read(lambda: kernel_module_version(root)),
    }
    for i, name in enumerate(SYSCTLS):
        out[f"host.sysctls[{i}].name"] = Reading.ok(name)
        out[f"host.sysctls[{i}].value"] = read(lambda name=name: _sysctl(root, name))
    modules = sorted((root / "sys/module").glob(_NVIDIA_MODULES))
    for i, module in enumerate(modules):
        out[f"driver.modules[{i}].name"] = Reading.ok(module.name)
        out[f"driver.modules[{i}].version"] = read(lambda m=module: _module_version(m))
        out[f"driver.modules[{i}].parameters"] = read(lambda m=module: _parameters(m))
    return out


def kernel_module_version(root: Path) -> str:
    """The loaded NVIDIA kernel module's version, from its /proc/driver/nvidia/version banner."""
    path = root / "proc/driver/nvidia/version"
    if not path.exists():
        raise Failed("nvidia kernel module not loaded")
    for line in path.read_text().splitlines():
        if line.startswith("NVRM version:"):
            match = _VERSION_TOKEN.search(line)
            if match:
                return match.group(1)
            raise Failed(f"no version in /proc/driver/nvidia/version: {line.strip()[:200]!r}")
    raise Failed("/proc/driver/nvidia/version has no NVRM version line")


def _cmdline(root: Path) -> str:
    path = root / "proc/cmdline"
    if not path.exists():
        raise NotSupported  # no procfs under the root: host.kernel and host.boot_id say so
    return bounded(path.read_text().strip(), "/proc/cmdline")


def _loaded_modules(root: Path) -> str:
    path = root / "proc/modules"
    if not path.exists():
        raise NotSupported  # a kernel built without loadable modules has none
    # "name size refcount deps state address" per line
    names = {line.split()[0] for line in path.read_text().splitlines() if line.strip()}
    return bounded(" ".join(sorted(names)), f"the names of {len(names)} loaded modules")


def _sysctl(root: Path, name: str) -> str:
    path = root / "proc/sys" / name.replace(".", "/")
    if not path.exists():
        raise NotSupported  # this kernel has no such tunable, or not in the agent's namespace
    return bounded(path.read_text().strip(), name)


def _module_version(module: Path) -> str:
    path = module / "version"
    if not path.exists():
        raise NotSupported
    return first_line(path)


def _parameters(module: Path) -> str:
    """Every parameter of `module` as compact JSON, names sorted; null where unreadable (0400
    files, such as nvidia_drm's modeset, to an agent that is not root)."""
    values: dict[str, str | None] = {}
    directory = module / "parameters"
    for path in sorted(directory.iterdir()) if directory.is_dir() else ():
        try:
            values[path.name] = path.read_text(errors="replace").strip()
        except PermissionError:
            values[path.name] = None
    text = json.dumps(values, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return bounded(text, f"the parameters of {module.name}")
