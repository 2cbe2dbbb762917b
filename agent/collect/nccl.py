"""NCCL facts: every libnccl.so.2 on the host (system library dirs and pip wheels)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plumb.agent.collect.libraries import find_libraries, library_facts
from plumb.facts import Reading

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = ["collect"]

_SYSTEM_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/local/lib",
)
# nvidia-nccl-cu12 wheels; one level of python3.X and of site-/dist-packages keeps the glob cheap.
_WHEEL_DIRS = (
    "usr/lib/python3*/*-packages/nvidia/nccl/lib",
    "usr/local/lib/python3*/*-packages/nvidia/nccl/lib",
)


def collect(sources: Sources) -> dict[str, Reading]:
    """nccl.libraries[i].path/version."""
    dirs = [*_SYSTEM_DIRS, *_WHEEL_DIRS, *(str(d).lstrip("/") for d in sources.library_dirs)]
    found = find_libraries(sources.host_root, [f"{d}/libnccl.so.2" for d in dirs])
    return library_facts(sources, "nccl", "nccl.libraries", found)
