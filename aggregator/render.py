"""Tables for people: what `plumb` commands and the demo print."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Group
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


def recipe_tables(body: dict) -> list[Table]:
    """A resolved recipe as tables: what applied, components in deployment order, findings."""
    crit = ", ".join(f"{k}={v}" for k, v in body["criteria"].items() if v not in ("any", 0))
    overlays = Table(
        title=f"recipe {body['content_hash'][:12]} for {crit or 'any'}", title_justify="left"
    )
    overlays.add_column("OVERLAY")
    overlays.add_column("STATUS")
    for name in body["overlays"]["applied"]:
        overlays.add_row(name, "[green]applied[/]")
    for ex in body["overlays"]["excluded"]:
        overlays.add_row(ex["name"], f"[yellow]excluded[/]: {ex['reason']}")
    components = Table(title="components, in deployment order", title_justify="left")
    for col in ("#", "COMPONENT", "VERSION", "NAMESPACE"):
        components.add_column(col)
    by_name = {c["name"]: c for c in body["components"]}
    for i, name in enumerate(body["deployment_order"], 1):
        c = by_name.get(name, {})
        components.add_row(str(i), name, str(c.get("version", "-")), str(c.get("namespace", "-")))
    tables = [overlays, components]
    if body["findings"]:
        findings = Table(title="findings", title_justify="left")
        for col in ("SEVERITY", "RULE", "MESSAGE", "REMEDIATION"):
            findings.add_column(col)
        for f in body["findings"]:
            findings.add_row(f["severity"], f["rule"], f["message"], f["remediation"])
        tables.append(findings)
    return tables


_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def drift_table(findings: list[dict]) -> Group:
    """Open drift findings, one row each, then what to do about each kind of them."""
    table = Table(title=f"{len(findings)} open drift findings", title_justify="left")
    table.add_column("NODE", no_wrap=True)
    for col in ("SEVERITY", "KIND", "COMPONENT", "EXPECTED → OBSERVED", "SINCE", "FIX"):
        table.add_column(col)
    fixes: dict[str, int] = {}
    for f in findings:
        style = _SEVERITY_STYLE.get(f["severity"], "")
        fix = fixes.setdefault(f["remediation"], len(fixes) + 1)
        table.add_row(
            f["node"],
            f"[{style}]{f['severity']}[/]" if style else f["severity"],
            f["kind"],
            f["component"],
            f"{f['expected'] or '-'} → {f['observed']}",
            datetime.fromisoformat(f["opened_at"]).astimezone(UTC).strftime("%H:%M:%S"),
            f"[{fix}]",
        )
    notes = [f"[{n}] {text}" for text, n in fixes.items()]
    return Group(table, *notes)
