"""Tables for people: what `plumb` commands and the demo print."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Group
from rich.table import Table

from plumb.aggregator import present
from plumb.tree import leaves


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
            present.age(r["last_report_at"], now),
        )
    return table


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


# --- the SRE's view: `plumb nodes`, `plumb node`, `plumb watch` -------------------------------


def _now() -> datetime:
    """The time ages are measured from; golden tests pin it."""
    return datetime.now(UTC)


def _findings_cell(counts: dict[str, int]) -> str:
    """`1 critical, 2 warning`, coloured by severity; `-` when none is open."""
    parts = [
        f"[{_SEVERITY_STYLE[sev]}]{n} {sev}[/]"
        for sev in present.SEVERITIES
        if (n := counts.get(sev, 0))
    ]
    return ", ".join(parts) or "[green]-[/]"


def fleet_table(rows: list[dict]) -> Table:
    """The `plumb nodes` table: pool, GPUs, stack versions, open findings, report age."""
    drifted = sum(1 for r in rows if r.get("drifted"))
    table = Table(title=f"{len(rows)} nodes, {drifted} drifted", title_justify="left")
    table.add_column("NODE", no_wrap=True)
    for col in ("POOL", "GPUS", "DRIVER", "CUDA", "NCCL", "FINDINGS", "REPORTED"):
        table.add_column(col)
    now = _now()
    for r in rows:
        age = present.age(r["last_report_at"], now)
        table.add_row(
            r["name"],
            r.get("pool") or "-",
            present.gpus_text(r["gpu_count"], r["gpu_product"]),
            r["driver_version"] or "-",
            r["cuda_driver_version"] or "-",
            r.get("nccl_version") or "-",
            _findings_cell(r.get("findings") or {}),
            age if r["connected"] else f"[red]{age} (down)[/]",
        )
    return table


def _cell(reading: object) -> str:
    """A fact reading for a table cell: its value, or (dim) why there is none."""
    text, ok = present.reading_text(reading)
    return text if ok else f"[dim]{text}[/]"


def _gpu_cell(gpu: dict, keys: tuple[str, ...]) -> str:
    return "/".join(text if ok else f"[dim]{text}[/]" for text, ok in present.gpu_cell(gpu, keys))


def node_tables(detail: dict, findings: list[dict], history: list[dict]) -> list:
    """`plumb node NAME`: summary, every fact, per-GPU table, open findings, recent history."""
    styled = {
        "State": "[green]connected[/]" if detail["connected"] else "[red]disconnected[/]",
        "Findings": _findings_cell(detail.get("findings") or {}),
    }
    head = Table(title=f"node {detail['name']}", title_justify="left", show_header=False)
    head.add_column("KEY", style="bold")
    head.add_column("VALUE")
    for key, value in present.summary_rows(detail, _now()):
        head.add_row(key, styled.get(key, value))
    facts = Table(title="facts", title_justify="left")
    facts.add_column("FACT", no_wrap=True)
    facts.add_column("VALUE")
    for path, reading in leaves(detail.get("facts") or {}, skip=("gpus",)):
        facts.add_row(path, _cell(reading))
    gpus = present.gpu_rows(detail)
    gpu_table = Table(title=f"{len(gpus)} GPUs", title_justify="left")
    for header, _ in present.GPU_COLUMNS:
        gpu_table.add_column(header.upper(), no_wrap=header in ("UUID", "PCI bus"))
    for gpu in gpus:
        gpu_table.add_row(*(_gpu_cell(gpu, keys) for _, keys in present.GPU_COLUMNS))
    out: list = [head, facts, gpu_table]
    out.append(drift_table(findings) if findings else "[green]no open drift findings[/]")
    out.append(history_table(history, title=f"{len(history)} recent changes, newest first"))
    return out


def watch_view(server: str, rows: list[dict], findings: list[dict], problem: str | None) -> Group:
    """One frame of `plumb watch`: the fleet, drifted first, and the open findings."""
    stamp = _now().strftime("%H:%M:%S")
    header = f"[bold]plumb watch[/] {server} · {stamp} UTC · Ctrl-C to quit"
    if problem:
        header += f"\n[red]{problem}[/]"
    ordered = sorted(rows, key=present.severity_order)
    return Group(header, fleet_table(ordered), drift_table(findings))


_STATUS_STYLE = {
    "pass": "green",
    "fail": "bold red",
    "error": "red",
    "warn": "yellow",
    "skip": "dim",
}


def validation_table(run: dict) -> Group:
    """A validation run: one row per node and check, then the totals and the verdict."""
    table = Table(title=f"validation {run['id']} ({run['state']})", title_justify="left")
    table.add_column("NODE", no_wrap=True)
    for col in ("CHECK", "STATUS", "FIGURE", "MESSAGE"):
        table.add_column(col)
    for r in run.get("results", []):
        style = _STATUS_STYLE.get(r["status"], "")
        figure = "-"
        if r["value"] is not None:
            figure = f"{r['value']:.1f} {r['unit'] or ''}".strip()
            if r["threshold"] is not None:
                figure += f" (min {r['threshold']:.1f})"
        table.add_row(r["node"], r["check"], f"[{style}]{r['status']}[/]", figure, r["message"])
    p = run["progress"]
    verdict = run["result"] or "running"
    colour = "green" if verdict == "passed" else "red" if verdict == "failed" else "yellow"
    totals = (
        f"[{colour}]{verdict}[/]: {p['pass']} pass, {p['fail']} fail, {p['error']} error, "
        f"{p['warn']} warn, {p['skip']} skip, {p['pending']} pending of {p['total']}"
    )
    return Group(table, totals)


_RUN_STATUS = {
    "ok": "[green]ok[/]",
    "failed": "[red]failed[/]",
    "incomplete": "[yellow]incomplete[/]",
}


def _bytes(size: int | None) -> str:
    if size is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _model(name: str | None) -> str:
    return (name or "?").removeprefix("NVIDIA ")


def nccl_table(runs: list[dict], source: str) -> Group:
    """`plumb nccl`: one row per run, then each run's hosts, versions and why it is not ok."""
    title = f"{len(runs)} nccl-tests runs in {source} (GB/s; BUSBW: out of place, largest size)"
    table = Table(title=title, title_justify="left")
    for col in ("#", "TEST", "RANKS", "NODES", "GPU", "BUSBW", "AT", "AVG", "STATUS"):
        table.add_column(col)
    notes = []
    for i, r in enumerate(runs, 1):
        table.add_row(
            str(i),
            r["collective"] or "?",
            "?" if r["ranks"] is None else str(r["ranks"]),
            str(len(r["nodes"])) if r["nodes"] else "?",
            ", ".join(sorted({_model(n["model"]) for n in r["nodes"]})) or "-",
            "-" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:g}",
            _bytes(r["largest_bytes"]),
            "-" if r["avg_busbw_gbps"] is None else f"{r['avg_busbw_gbps']:g}",
            _RUN_STATUS[r["status"]],
        )
        if r["nodes"]:
            hosts = ", ".join(f"{n['host']} ({n['gpus']} GPUs)" for n in r["nodes"])
            notes.append(f"run {i} nodes: {hosts}")
        versions = [
            f"{name} {r[key]}"
            for name, key in (("NCCL", "nccl_version"), ("nccl-tests", "nccl_tests_version"))
            if r[key]
        ]
        if versions:
            notes.append(f"run {i} versions: {', '.join(versions)}")
        notes += [f"run {i} {r['status']}: {why}" for why in r["reasons"]]
    return Group(table, *notes)
