"""The parameters each check accepts, and their bounds.

The agent trusts the aggregator with nothing it runs: a RunChecks request names checks of the
fixed catalog (`runner.CHECKS`), and its parameters and its CheckSpec's timeout are checked
here before the check starts.
An unknown parameter, a value that does not parse or one out of bounds refuses the check
with `error`, so a compromised or buggy aggregator can neither pass flags to nccl-tests nor
allocate a benchmark larger than any GPU's memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["PARAMS", "refused", "timeout_refused"]

_SIZE = re.compile(r"(\d{1,6})([KMG]?)")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _size(text: str) -> int:
    """nccl-tests' size syntax: digits and an optional K, M or G."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError("not a size like 4G, 512M or 1048576")
    return int(match[1]) * _UNITS[match[2]]


@dataclass(frozen=True)
class Param:
    """One parameter: how its string value parses and the closed range it must fall in."""

    parse: Callable[[str], float]
    low: float
    high: float

    def problem(self, text: str) -> str | None:
        """Why `text` is refused, or None."""
        try:
            value = self.parse(text)
        except ValueError:
            return f"{text[:32]!r} does not parse"
        if not self.low <= value <= self.high:
            return f"{text[:32]} is outside [{self.low:g}, {self.high:g}]"
        return None


# Every check takes its own timeout; an hour bounds the longest nccl-tests sweep.
_TIMEOUT = {"timeout_s": Param(float, 1, 3600)}
# Up to 64 GiB per buffer (the largest GPU memory is ~192 GiB; two buffers are allocated).
_BUFFER = {"bytes": Param(int, 1 << 20, 1 << 36), "iterations": Param(int, 1, 10_000)}
_MATMUL = {"matrix_size": Param(int, 256, 32_768), "iterations": Param(int, 1, 10_000)}

PARAMS: dict[str, dict[str, Param]] = {
    "gpu-count": {**_TIMEOUT, "expected_gpus": Param(int, 0, 1024)},
    "driver-nvml": _TIMEOUT,
    "persistence-mode": _TIMEOUT,
    "ecc": _TIMEOUT,
    "nvlink": _TIMEOUT,
    "pcie-link": _TIMEOUT,
    # Up to 30 days back: the kernel log rarely reaches further.
    "xid": {**_TIMEOUT, "window_s": Param(float, 1, 30 * 86400)},
    "matmul-bf16": {**_TIMEOUT, **_MATMUL},
    "matmul-fp16": {**_TIMEOUT, **_MATMUL},
    "memory-bandwidth": {**_TIMEOUT, **_BUFFER},
    "host-device-bandwidth": {**_TIMEOUT, **_BUFFER},
    "nccl-allreduce": {**_TIMEOUT, **_BUFFER, "max_bytes": Param(_size, 1 << 20, 1 << 36)},
}


def refused(check_id: str, params: Mapping[str, str]) -> str | None:
    """Why the parameters of `check_id` are refused, or None when every one is allowed."""
    allowed = PARAMS.get(check_id, {})
    for name, text in sorted(params.items()):
        param = allowed.get(name)
        if param is None:
            return f"parameter {name[:64]!r} is not one {check_id} takes ({', '.join(allowed)})"
        if (problem := param.problem(text)) is not None:
            return f"parameter {name}: {problem}"
    return None


def timeout_refused(timeout_s: float) -> str | None:
    """Why a CheckSpec's `timeout_s` is refused, or None: it must be a positive number of
    seconds up to the hour any check may be given (NaN, infinities, negatives and 1e300 are
    refused; 0, proto3's unset, never reaches here: the runner's default applies)."""
    high = _TIMEOUT["timeout_s"].high
    if 0 < timeout_s <= high:  # False for NaN too
        return None
    return f"timeout_s {timeout_s:g} is outside (0, {high:g}]"
