"""Typed parsers for values as nvidia-smi and mock-NVML configs spell them.

nvidia-smi prints every value as text with its unit (`81559 MiB`, `350.00 W`, `16x`), and
prints why a value is missing in a handful of fixed spellings (`N/A`, `[N/A]`, `Not Supported`,
`Requested functionality has been deprecated`), bracketed in some versions. Each parser here
takes one kind of value in every spelling of every layout, so an importer never special-cases
a file: `Missing` means "no value, by design of the GPU or driver" and `Unread` means "nvidia-smi
tried and NVML failed", which the simulation replays as that NVML error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pynvml

__all__ = [
    "Unread",
    "ValueProblem",
    "architecture",
    "bus_id",
    "cuda_version",
    "enabled",
    "integer",
    "is_missing",
    "link_width",
    "mebibytes",
    "pci_device_id",
    "quantity",
    "token",
    "unread",
    "yes_no",
]


class ValueProblem(ValueError):
    """Text that is not a value of the expected kind; the message quotes it."""


@dataclass(frozen=True)
class Unread:
    """A value nvidia-smi could not read: `error` is the NVML error name (NVML_ERROR_<error>)."""

    error: str


# Spellings of "this GPU or driver has no such value" (lower case, brackets stripped).
_MISSING = {
    "",
    "n/a",
    "na",
    "not supported",
    "not available",
    "requested functionality has been deprecated",
}
# Spellings of a failed read -> the NVML error nvidia-smi got.
_UNREAD = {
    "unknown error": "UNKNOWN",
    "gpu is lost": "GPU_IS_LOST",
    "gpu requires reset": "RESET_REQUIRED",
    "insufficient permissions": "NO_PERMISSION",
    "timeout": "TIMEOUT",
    "not found": "NOT_FOUND",
}

_UNITS_MIB = {"B": 1 / (1 << 20), "KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1 << 20}
_QUANTITY = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%]*)$")


def _plain(text: object) -> str:
    value = ("" if text is None else str(text)).strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1].strip()
    return value


def is_missing(text: object) -> bool:
    """True for a value nvidia-smi says does not exist (`N/A`, `[Not Supported]`...)."""
    return _plain(text).lower() in _MISSING


def unread(text: object) -> Unread | None:
    """The NVML error behind a failed read (`[Unknown Error]`, `GPU is lost`), else None."""
    code = _UNREAD.get(_plain(text).lower())
    return Unread(code) if code else None


def integer(text: str | int) -> int:
    """`150`, `0x1E` (or an int from YAML) -> an int."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value = _plain(str(text))
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        raise ValueProblem(f"{text!r} is not an integer") from None


def quantity(text: str, unit: str) -> float:
    """`350.00 W` with unit "W" -> 350.0; refuses a number in another unit."""
    match = _QUANTITY.match(_plain(text))
    if not match:
        raise ValueProblem(f"{text!r} is not a number with a unit")
    number, found = match.groups()
    if found != unit:
        raise ValueProblem(f"{text!r} is not in {unit}")
    return float(number)


def mebibytes(text: str) -> int:
    """`81559 MiB`, `80 GiB` -> whole MiB, as NVML's byte count divided by 2**20."""
    match = _QUANTITY.match(_plain(text))
    if not match or match.group(2) not in _UNITS_MIB:
        raise ValueProblem(f"{text!r} is not a memory size (B, KiB, MiB, GiB, TiB)")
    return int(float(match.group(1)) * _UNITS_MIB[match.group(2)])


def link_width(text: str) -> int:
    """`16x` (nvidia-smi) or `x16` or `16` -> 16."""
    value = _plain(text).lower().removesuffix("x").removeprefix("x")
    return integer(value)


def _switch(text: str, on: tuple[str, ...], off: tuple[str, ...], what: str) -> bool:
    value = _plain(text).lower()
    if value in on:
        return True
    if value in off:
        return False
    raise ValueProblem(f"{text!r} is not {what}")


def enabled(text: str | bool) -> bool:
    """`Enabled`/`Disabled` (also `On`/`Off`, and YAML booleans) -> bool."""
    if isinstance(text, bool):
        return text
    return _switch(
        text, ("enabled", "on", "true"), ("disabled", "off", "false"), "Enabled/Disabled"
    )


def yes_no(text: str | bool) -> bool:
    """`Yes`/`No` (also `True`/`False`, and YAML booleans) -> bool."""
    if isinstance(text, bool):
        return text
    return _switch(text, ("yes", "true"), ("no", "false"), "Yes/No")


def active(text: str | bool) -> bool:
    """`Active`/`Not Active` (a clock-event reason in nvidia-smi; YAML booleans) -> bool."""
    if isinstance(text, bool):
        return text
    return _switch(text, ("active",), ("not active",), "Active/Not Active")


def token(text: str) -> str:
    """`In Progress`, `Limited Capacity` -> `in_progress`, `limited_capacity`."""
    return "_".join(_plain(text).lower().replace("-", " ").split())


def architecture(text: str) -> str:
    """`Ada Lovelace`, `Hopper`, `blackwell` -> NVML's architecture name (`ada`, `hopper`), or
    `unknown` for one this pynvml does not name (a newer GPU), as the NVML collector says."""
    name = token(text)
    for candidate in (name, name.split("_")[0]):
        if isinstance(getattr(pynvml, f"NVML_DEVICE_ARCH_{candidate.upper()}", None), int):
            return candidate
    return "unknown"


_BUS_ID = re.compile(r"^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])$")


def bus_id(text: str) -> str:
    """`0000:1a:00.0` or `00000000:1A:00.0` -> NVML's form `00000000:1A:00.0`."""
    match = _BUS_ID.match(_plain(text))
    if not match:
        raise ValueProblem(f"{text!r} is not a PCI bus id (domain:bus:device.function)")
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{function}"


def pci_device_id(text: str | int) -> int:
    """NVML's combined id `26B910DE` / `0x233010DE` (device in the high 16 bits, vendor in the
    low) -> the device id 0x26B9."""
    value = (
        text if isinstance(text, int) else integer(f"0x{_plain(text).lower().removeprefix('0x')}")
    )
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueProblem(f"{text!r} is not a 32-bit PCI id")
    return value >> 16


def cuda_version(text: str) -> int:
    """`13.2` -> NVML's integer form 13020."""
    match = re.match(r"^(\d+)\.(\d+)$", _plain(text))
    if not match:
        raise ValueProblem(f"{text!r} is not a CUDA version (major.minor)")
    return int(match.group(1)) * 1000 + int(match.group(2)) * 10
