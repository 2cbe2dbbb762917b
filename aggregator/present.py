"""What people see of a fleet and a node, whatever draws it: the terminal (cli/render.py) and
the web page (web/pages.py) style these, and decide nothing themselves.

Every function reads the API's JSON (api/models.py dumped), the shape the CLI gets over HTTP.
"""

from __future__ import annotations

from datetime import UTC, datetime

from plumb.aggregator.drift import SEVERITIES

__all__ = [
    "GPU_COLUMNS",
    "SEVERITIES",
    "age",
    "clock",
    "gpu_cell",
    "gpu_rows",
    "gpus_text",
    "reading_text",
    "severity_order",
    "summary_rows",
    "worst",
]

# (header, fact key(s)) of the per-GPU table; two keys show `current/max`; a `sensors.` key is
# the GPU's latest sensor reading (the detail's `sensors` block, joined by `gpu_rows`).
GPU_COLUMNS: list[tuple[str, tuple[str, ...]]] = [
    ("#", ("index",)),
    ("Product", ("name",)),
    ("UUID", ("uuid",)),
    ("PCI bus", ("pci_bus_id",)),
    ("Memory", ("memory_total_bytes",)),
    ("Temp °C", ("sensors.temperature_celsius",)),
    ("ECC", ("ecc_mode_current",)),
    ("ECC uncorrected", ("ecc_uncorrected_volatile",)),
    ("MIG", ("mig_mode_current",)),
    ("PCIe gen", ("pcie_link_gen_current", "pcie_link_gen_max")),
    ("PCIe width", ("pcie_link_width_current", "pcie_link_width_max")),
    ("NVLink up", ("nvlink_links_up", "nvlink_links_total")),
    ("VBIOS", ("vbios_version",)),
]


def severity_order(row: dict) -> tuple:
    """Sort key: most critically drifted nodes first, then most warnings, then by name."""
    c = row.get("findings") or {}
    return (*(-c.get(s, 0) for s in SEVERITIES), row["name"])


def worst(counts: dict[str, int]) -> str | None:
    """The most severe severity with an open finding, or None."""
    return next((s for s in SEVERITIES if counts.get(s)), None)


def _at(stamp: str | datetime) -> datetime:
    return datetime.fromisoformat(stamp) if isinstance(stamp, str) else stamp


def age(stamp: str | datetime | None, now: datetime) -> str:
    """`42s ago`, `12m ago`, `3h ago`, or `never`."""
    if stamp is None:
        return "never"
    seconds = max(0, int((now - _at(stamp)).total_seconds()))
    if seconds < 120:
        return f"{seconds}s ago"
    return f"{seconds // 60}m ago" if seconds < 7200 else f"{seconds // 3600}h ago"


def clock(stamp: str | datetime) -> str:
    """A time as `2026-07-01 03:00:00 UTC`."""
    return _at(stamp).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def gpus_text(count: int, product: str | None) -> str:
    """`8 × H100 80GB HBM3`, or `-` without GPUs."""
    return f"{count} × {(product or '?').removeprefix('NVIDIA ')}" if count else "-"


def reading_text(reading: object) -> tuple[str, bool]:
    """A fact reading as text, and whether it is a value (False: why there is none)."""
    if not isinstance(reading, dict):
        return "-", False
    if reading.get("status") != "ok":
        return str(reading.get("status")), False
    value = reading.get("value")
    if isinstance(value, bool):
        return ("yes" if value else "no"), True
    return str(value), True


def gpu_rows(detail: dict) -> list[dict]:
    """The node's GPUs (nested facts), each with its latest sensor readings under `sensors`
    (matched by GPU index; absent when the node streams none)."""
    block = detail.get("sensors") or {}
    readings = {g.get("index"): g for g in block.get("gpus") or []}
    rows = []
    for gpu in (detail.get("facts") or {}).get("gpus") or []:
        index = (gpu.get("index") or {}).get("value")
        rows.append({**gpu, "sensors": readings.get(index, {})})
    return rows


def gpu_cell(gpu: dict, keys: tuple[str, ...]) -> list[tuple[str, bool]]:
    """The readings of one GPU column, as `reading_text` gives them; memory in GiB; a sensor
    reading as its value, `-` when there is none."""
    if keys[0].startswith("sensors."):
        value = (gpu.get("sensors") or {}).get(keys[0].removeprefix("sensors."))
        return [("-", False) if value is None else (str(value), True)]
    if keys == ("memory_total_bytes",):
        r = gpu.get("memory_total_bytes") or {}
        if r.get("status") == "ok" and isinstance(r.get("value"), int):
            return [(f"{r['value'] / 2**30:.0f} GiB", True)]
    return [reading_text(gpu.get(k)) for k in keys]


def summary_rows(detail: dict, now: datetime) -> list[tuple[str, str]]:
    """The node summary as (label, text); `State` and `Findings` are styled by the renderer
    from `detail` itself."""
    return [
        ("State", "connected" if detail.get("connected") else "disconnected"),
        ("Last report", age(detail.get("last_report_at"), now)),
        ("Pool", detail.get("pool") or "-"),
        ("GPUs", gpus_text(detail.get("gpu_count") or 0, detail.get("gpu_product"))),
        ("Driver", detail.get("driver_version") or "-"),
        ("CUDA (driver)", detail.get("cuda_driver_version") or "-"),
        ("CUDA runtime", detail.get("cuda_runtime_version") or "-"),
        ("NCCL", detail.get("nccl_version") or "-"),
        ("Findings", ""),
        ("Kernel", detail.get("kernel") or "-"),
        ("OS", detail.get("os") or "-"),
        ("Agent", detail.get("agent_version") or "-"),
        ("Boot id", detail.get("boot_id") or "-"),
        ("Content hash", (detail.get("content_hash") or "-")[:16]),
    ]
