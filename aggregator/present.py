"""What people see of a fleet and a node, whatever draws it: the terminal (cli/render.py) and
the web page (web/pages.py) style these, and decide nothing themselves.

Every function reads the API's JSON (api/models.py dumped), the shape the CLI gets over HTTP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from plumb.aggregator.drift import SEVERITIES

__all__ = [
    "GPU_COLUMNS",
    "HEALTH_COLUMNS",
    "SEVERITIES",
    "GpuColumn",
    "age",
    "clock",
    "column_finding",
    "findings_text",
    "gpu_cell",
    "gpu_findings",
    "gpu_rows",
    "gpus_text",
    "reading_text",
    "severity_order",
    "summary_rows",
    "worst",
    "xid_texts",
]


@dataclass(frozen=True)
class GpuColumn:
    """A column of a per-GPU table: its header, the fact key(s) it shows (two show
    `current/max`; a `sensors.` key is the GPU's latest sensor reading, joined by `gpu_rows`),
    and the names of the health findings (recipes/drift.yaml `health.gpus`) it is marked by."""

    header: str
    keys: tuple[str, ...]
    findings: tuple[str, ...] = ()


# The GPUs as they are: what each is and how it is set up and linked.
GPU_COLUMNS: list[GpuColumn] = [
    GpuColumn("#", ("index",)),
    GpuColumn("Product", ("name",)),
    GpuColumn("UUID", ("uuid",)),
    GpuColumn("PCI bus", ("pci_bus_id",)),
    GpuColumn("Memory", ("memory_total_bytes",)),
    GpuColumn("ECC", ("ecc_mode_current",)),
    GpuColumn("MIG", ("mig_mode_current",)),
    GpuColumn("PCIe gen", ("pcie_link_gen_current", "pcie_link_gen_max"), ("pcie-gen",)),
    GpuColumn("PCIe width", ("pcie_link_width_current", "pcie_link_width_max"), ("pcie-width",)),
    GpuColumn("NVLink up", ("nvlink_links_up", "nvlink_links_total"), ("nvlink-down",)),
    GpuColumn("VBIOS", ("vbios_version",)),
]

# The GPUs' health: error totals (facts) and the latest readings; the recent XIDs are a column
# of their own (`xid_texts`), each code marked by its own finding.
HEALTH_COLUMNS: list[GpuColumn] = [
    GpuColumn("#", ("index",)),
    GpuColumn("XIDs", ("xid_count",)),
    GpuColumn(
        "ECC uncorrected vol/agg",
        ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"),
        ("ecc-uncorrected",),
    ),
    GpuColumn("Retired pending", ("retired_pages_pending",), ("retired-pages-pending",)),
    GpuColumn(
        "Remapped pending/failed",
        ("remapped_rows_pending", "remapped_rows_failed"),
        ("remap-pending", "remapped-rows-failed"),
    ),
    GpuColumn("Temp °C", ("sensors.temperature_celsius",)),
    GpuColumn("Power W", ("sensors.power_draw_watts",)),
    GpuColumn("Util %", ("sensors.gpu_utilization_ratio",)),
]

# How a sensor reading reads in a cell, by field: watts whole, a ratio as a percentage.
_SENSOR_TEXT = {
    "power_draw_watts": lambda v: f"{v:.0f}",
    "gpu_utilization_ratio": lambda v: f"{v * 100:.0f}",
}
_HEALTH_COMPONENT = re.compile(r"gpu(\d+)/(.+)")


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
        field = keys[0].removeprefix("sensors.")
        value = (gpu.get("sensors") or {}).get(field)
        if value is None:
            return [("-", False)]
        return [(_SENSOR_TEXT.get(field, str)(value), True)]
    if keys == ("memory_total_bytes",):
        r = gpu.get("memory_total_bytes") or {}
        if r.get("status") == "ok" and isinstance(r.get("value"), int):
            return [(f"{r['value'] / 2**30:.0f} GiB", True)]
    return [reading_text(gpu.get(k)) for k in keys]


def gpu_findings(findings: list[dict]) -> dict[int, dict[str, dict]]:
    """Open health findings by GPU index, then by name: `gpu3/xid-79` is GPU 3's `xid-79`."""
    out: dict[int, dict[str, dict]] = {}
    for f in findings:
        match = _HEALTH_COMPONENT.fullmatch(f.get("component") or "")
        if f.get("kind") == "health" and match and not f.get("closed_at"):
            out.setdefault(int(match.group(1)), {})[match.group(2)] = f
    return out


def column_finding(column: GpuColumn, found: dict[str, dict]) -> dict | None:
    """The most severe of the GPU's open findings (`gpu_findings`) that mark `column`."""
    marking = [found[name] for name in column.findings if name in found]
    return min(marking, key=lambda f: SEVERITIES.index(f["severity"]), default=None)


def findings_text(found: dict[str, dict]) -> list[tuple[str, str]]:
    """(severity, names) of the GPU's open findings, most severe first: `remap-pending, xid-63`."""
    by: dict[str, list[str]] = {}
    for name, f in sorted(found.items()):
        by.setdefault(f["severity"], []).append(name)
    return [(sev, ", ".join(by[sev])) for sev in SEVERITIES if sev in by]


def xid_texts(gpu: dict, found: dict[str, dict], now: datetime) -> list[tuple[str, dict | None]]:
    """The GPU's XIDs, most recent first, as `79 ×1 (30s ago)`, each with the finding it
    opened (`gpu_findings`; its `observed` says what the code means), or None."""
    rows = []
    for xid in gpu.get("xids") or []:
        code, ok = reading_text(xid.get("code"))
        if not ok:
            continue
        count, _ = reading_text(xid.get("count"))
        seen = xid.get("last_seen_unix_s") or {}
        at = seen.get("value") if seen.get("status") == "ok" else None
        when = "" if at is None else f" ({age(datetime.fromtimestamp(at, UTC), now)})"
        rows.append((at or 0, f"{code} ×{count}{when}", found.get(f"xid-{code}")))
    rows.sort(key=lambda r: -r[0])
    return [(text, finding) for _, text, finding in rows]


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
