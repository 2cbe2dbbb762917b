"""CUDA facts: the toolkit installed on the host and every libcudart copy with its version."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from plumb.agent.collect.libraries import find_libraries, library_facts
from plumb.facts import Reading

if TYPE_CHECKING:
    from plumb.agent.collect import Sources

__all__ = ["collect"]

_RUNTIME_DIRS = ("usr/local/cuda*/lib64", "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu")


def collect(sources: Sources) -> dict[str, Reading]:
    """cuda.cuda_toolkit_version and cuda.runtimes[i].path/version."""
    dirs = [*_RUNTIME_DIRS, *(str(d).lstrip("/") for d in sources.library_dirs)]
    found = find_libraries(sources.host_root, [f"{d}/libcudart.so*" for d in dirs])
    return {
        "cuda.cuda_toolkit_version": _toolkit_version(sources),
        **library_facts(sources, "cudart", "cuda.runtimes", found),
    }


def _toolkit_version(sources: Sources) -> Reading:
    """From version.json (CUDA >= 11.1) or version.txt; not_supported when no toolkit is there."""
    cuda = sources.host_root / "usr/local/cuda"
    try:
        if (cuda / "version.json").exists():
            return Reading.ok(json.loads((cuda / "version.json").read_text())["cuda"]["version"])
        if (cuda / "version.txt").exists():
            match = re.search(r"CUDA Version (\S+)", (cuda / "version.txt").read_text())
            if match:
                return Reading.ok(match.group(1))
            return Reading.failed(f"no version in {cuda / 'version.txt'}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Reading.failed(f"cannot read the CUDA toolkit version: {type(exc).__name__}: {exc}")
    return Reading.not_supported()
