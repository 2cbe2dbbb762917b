"""Tables for people: what `plumb` commands and the demo print."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.table import Table


def nodes_table(rows: list[dict]) -> Table:
    """The `plumb nodes` table."""
    table = Table(title=f"{len(rows)} nodes", title_justify="left")
    table.add_column("NODE", no_wrap=True)
    for col in ("STATUS", "GPUS", "DRIVER", "CUDA", "OS", "REPORTED"):
        table.add_column(col)
    now = datetime.now(UTC)
    for r in rows:
        product = (r["gpu_product"] or "?").removeprefix("NVIDIA ")
        gpus = f"{r['gpu_count']}× {product}" if r["gpu_count"] else "-"
        table.add_row(
            r["name"],
            "[green]up[/]" if r["connected"] else "[red]down[/]",
            gpus,
            r["driver_version"] or "-",
            r["cuda_driver_version"] or "-",
            r["os"] or "-",
            _age(r["last_report_at"], now),
        )
    return table


def _age(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return "never"
    seconds = int((now - datetime.fromisoformat(stamp)).total_seconds())
    if seconds < 120:
        return f"{seconds}s ago"
    return f"{seconds // 60}m ago" if seconds < 7200 else f"{seconds // 3600}h ago"


def history_table(rows: list[dict], title: str = "changes, newest first") -> Table:
    """Fact changes; a first report's values show as changes from "-"."""
    table = Table(title=title, title_justify="left")
    table.add_column("AT (UTC)", no_wrap=True)
    for col in ("FACT", "OLD", "NEW"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            datetime.fromisoformat(r["at"]).astimezone(UTC).strftime("%H:%M:%S.%f")[:-3],
            r["path"],
            str((r["old"] or {}).get("value", "-")),
            str((r["new"] or {}).get("value", "-")),
        )
    return table
