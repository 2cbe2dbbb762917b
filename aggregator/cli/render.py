"""Tables for people: what `plumb` commands and the demo print.

Each table is a `Sheet`: a title, columns, rows of rich-markup cells and notes under it. On a
terminal it draws as a rich table whose cells wrap rather than cut; in a pipe it prints as
plain aligned columns, every value whole, so `grep` and `awk` see what the API said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from rich.markup import escape

from plumb.aggregator import present

__all__ = [
    "STALE_AFTER_S",
    "Sheet",
    "diff_table",
    "baselines_table",
    "drift_table",
    "fleet_table",
    "gate_table",
    "history_table",
    "nccl_table",
    "node_status",
    "node_tables",
    "nodes_table",
    "plural",
    "recipe_tables",
    "validation_table",
    "watch_view",
    "whatif_tables",
]

# A connected node is `stale` past this without a report: the aggregator's
# kubernetes.agent_stale_s default (two 30 s heartbeats plus the idle timeout's margin), the
# age at which it marks the node's agent down; a test holds the two equal.
STALE_AFTER_S = 90.0
_GAP = "   "  # between plain columns, as kubectl prints them


@dataclass
class Sheet:
    """A titled table with notes under it: rich on a terminal, plain columns in a pipe."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    show_header: bool = True
    # Columns a terminal never wraps (names, versions, states): the others give up width.
    fixed: tuple[str, ...] = ()

    def __rich__(self):
        from rich.console import Group
        from rich.table import Table

        table = Table(
            title=self.title,
            title_justify="left",
            show_header=self.show_header,
            box=None,
            pad_edge=False,
            header_style="bold",
        )
        for header in self.headers:
            table.add_column(header, overflow="fold", no_wrap=header in self.fixed)
        for row in self.rows:
            table.add_row(*row)
        return Group(table, *self.notes) if self.notes else table

    def plain(self) -> str:
        """The sheet as text: title, header, rows padded to each column's widest, notes."""
        from rich.cells import cell_len

        grid = [self.headers] if self.show_header else []
        grid += [[plain(cell) for cell in row] for row in self.rows]
        widths = [max((cell_len(r[i]) for r in grid), default=0) for i in range(len(self.headers))]
        lines = [plain(self.title)]
        for row in grid:
            cells = [c + " " * (w - cell_len(c)) for c, w in zip(row, widths, strict=True)]
            lines.append(_GAP.join(cells).rstrip())
        lines += [plain(note) for note in self.notes]
        return "\n".join(lines)


def plain(markup: str) -> str:
    """Rich markup as the text it shows."""
    from rich.text import Text

    return Text.from_markup(markup).plain


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 node`, `3 nodes`; `many` where adding an s is wrong."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def _now() -> datetime:
    """The time ages are measured from; golden tests pin it."""
    return datetime.now(UTC)


def _when(stamp: str, now: datetime) -> str:
    """`HH:MM:SS` on the day of `now` (UTC), else `YYYY-MM-DD HH:MM`."""
    at = datetime.fromisoformat(stamp).astimezone(UTC)
    return at.strftime("%H:%M:%S") if at.date() == now.date() else at.strftime("%Y-%m-%d %H:%M")


# --- node status: up, stale or down ------------------------------------------------------------

_STATUS_ORDER = {"down": 0, "stale": 1, "up": 2}
_STATUS_CELL = {"down": "[bold red]down[/]", "stale": "[yellow]stale[/]", "up": "[green]up[/]"}


def node_status(row: dict, now: datetime) -> str:
    """`down` (no agent stream), `stale` (streaming but silent past STALE_AFTER_S) or `up`."""
    if not row["connected"]:
        return "down"
    last = row.get("last_report_at")
    if last is None or (now - datetime.fromisoformat(last)).total_seconds() > STALE_AFTER_S:
        return "stale"
    return "up"


def _by_status(rows: list[dict], now: datetime) -> list[dict]:
    """Down nodes first, then stale, then up; the API's order within each."""
    return sorted(rows, key=lambda r: _STATUS_ORDER[node_status(r, now)])


def _status_counts(rows: list[dict], now: datetime) -> str:
    """`1 down, 0 stale, 2 up`."""
    statuses = [node_status(r, now) for r in rows]
    return ", ".join(f"{statuses.count(s)} {s}" for s in _STATUS_ORDER)


def nodes_table(rows: list[dict]) -> Sheet:
    """Nodes as the snapshot and the demo list them: status, GPUs, driver, CUDA, OS."""
    now = _now()
    sheet = Sheet(
        f"{plural(len(rows), 'node')}: {_status_counts(rows, now)}",
        ["NODE", "STATUS", "GPUS", "DRIVER", "CUDA", "OS", "REPORTED"],
        fixed=("NODE", "STATUS", "DRIVER", "CUDA"),
    )
    for r in _by_status(rows, now):
        sheet.rows.append(
            [
                escape(r["name"]),
                _STATUS_CELL[node_status(r, now)],
                escape(present.gpus_text(r["gpu_count"], r["gpu_product"])),
                escape(r["driver_version"] or "-"),
                escape(r["cuda_driver_version"] or "-"),
                escape(r["os"] or "-"),
                present.age(r["last_report_at"], now),
            ]
        )
    return sheet


def _findings_cell(counts: dict[str, int]) -> str:
    """`1 critical, 2 warning`, coloured by severity; `-` when none is open."""
    parts = [
        f"[{_SEVERITY_STYLE[sev]}]{n} {sev}[/]"
        for sev in present.SEVERITIES
        if (n := counts.get(sev, 0))
    ]
    return ", ".join(parts) or "[green]-[/]"


def fleet_table(rows: list[dict], *, wide: bool = False) -> Sheet:
    """The `plumb nodes` table, down nodes first: status, pool, GPUs, driver and CUDA, open
    findings, report age; `wide` adds NCCL, the CUDA runtime, OS and kernel."""
    now = _now()
    drifted = sum(1 for r in rows if r.get("drifted"))
    headers = ["NODE", "STATUS", "POOL", "GPUS", "DRIVER", "CUDA", "FINDINGS", "REPORTED"]
    if wide:
        headers += ["NCCL", "CUDA RUNTIME", "OS", "KERNEL"]
    sheet = Sheet(
        f"{plural(len(rows), 'node')}: {_status_counts(rows, now)}; {drifted} drifted",
        headers,
        fixed=("NODE", "STATUS", "DRIVER", "CUDA", "NCCL", "CUDA RUNTIME"),
    )
    for r in _by_status(rows, now):
        cells = [
            escape(r["name"]),
            _STATUS_CELL[node_status(r, now)],
            escape(r.get("pool") or "-"),
            escape(present.gpus_text(r["gpu_count"], r["gpu_product"])),
            escape(r["driver_version"] or "-"),
            escape(r["cuda_driver_version"] or "-"),
            _findings_cell(r.get("findings") or {}),
            present.age(r["last_report_at"], now),
        ]
        if wide:
            keys = ("nccl_version", "cuda_runtime_version", "os", "kernel")
            cells += [escape(r.get(key) or "-") for key in keys]
        sheet.rows.append(cells)
    return sheet


def history_table(rows: list[dict], title: str = "changes, newest first") -> Sheet:
    """Fact changes; a first report's values show as changes from "-"."""
    sheet = Sheet(title, ["AT (UTC)", "FACT", "OLD", "NEW"])
    for r in rows:
        sheet.rows.append(
            [
                datetime.fromisoformat(r["at"]).astimezone(UTC).strftime("%H:%M:%S.%f")[:-3],
                escape(r["path"]),
                escape(str((r["old"] or {}).get("value", "-"))),
                escape(str((r["new"] or {}).get("value", "-"))),
            ]
        )
    return sheet


def changes_table(events: list[dict]) -> Sheet:
    """The fleet's change events (GET /v1/changes), newest first: one line each, with what
    opened or closed on those nodes and the validations of its window."""
    now = _now()
    sheet = Sheet(
        f"{plural(len(events), 'change event')}, newest first",
        ["STARTED (UTC)", "FACT", "OLD → NEW", "NODES", "POOL", "FINDINGS", "VALIDATIONS"],
        fixed=("STARTED (UTC)", "OLD → NEW", "NODES"),
    )
    for e in events:
        n = len(e["nodes"])
        nodes = f"{n} of {e['pool_nodes']}" if e["pool"] and e["pool_nodes"] else str(n)
        opened, closed = len(e["opened"]), len(e["closed"])
        findings = ", ".join(
            part for part in (opened and f"{opened} opened", closed and f"{closed} closed") if part
        )
        runs = ", ".join(f"{r['id'][:8]} {r['result'] or 'running'}" for r in e["validations"])
        sheet.rows.append(
            [
                _when(e["started_at"], now),
                escape(e["fact"]),
                escape(f"{e['old'] or '-'} → {e['new'] or '-'}"),
                nodes,
                escape(e["pool"] or "-"),
                findings or "-",
                escape(runs) or "-",
            ]
        )
    return sheet


def diff_table(body: dict) -> Sheet:
    """`plumb diff`: one row per fact that differs, with its reading on each side."""
    changes = body["changes"]
    title = f"{plural(len(changes), 'fact')} differ from {body['a']} to {body['b']}"
    sheet = Sheet(
        escape(title), ["NODE", "FACT", "A", "B"], show_header=bool(changes), fixed=("NODE",)
    )
    for c in changes:
        sheet.rows.append(
            [escape(c["node"]), escape(c["path"]), _diff_cell(c["a"]), _diff_cell(c["b"])]
        )
    if not changes:
        sheet.notes = ["no stack fact differs"]
    return sheet


def _diff_cell(reading: dict | None) -> str:
    """A side's reading: its value, `-` where the side lacks the fact, else (dim) its status
    and error."""
    if reading is None:
        return "[dim]-[/]"
    text, ok = present.reading_text(reading)
    if not ok and reading.get("error"):
        text = f"{text}: {reading['error']}"
    return escape(text) if ok else f"[dim]{escape(text)}[/]"


def baselines_table(rows: list[dict]) -> Sheet:
    """The fleet's learned baselines (GET /v1/baselines): one line per twin group and check."""
    sheet = Sheet(
        f"{plural(len(rows), 'baseline')} learned from the fleet",
        ["MODEL", "TOPOLOGY", "FABRIC", "FIGURE", "TWINS", "MEDIAN", "SPREAD"],
        fixed=("TOPOLOGY", "FABRIC", "TWINS", "MEDIAN", "SPREAD"),
    )
    for b in rows:
        unit = f" {b['unit']}" if b["unit"] else ""
        sheet.rows.append(
            [
                escape(b["model"]),
                f"{b['gpus']} GPUs",
                escape(b["fabric"]),
                escape(b["check"]),
                str(b["twins"]),
                escape(f"{b['median']:.4g}{unit}"),
                escape(f"±{b['spread']:.3g}{unit}"),
            ]
        )
    if not rows:
        sheet.notes.append("none yet: a group shows once enough of its nodes ran a benchmark")
    return sheet


def recipe_tables(body: dict) -> list[Sheet]:
    """A resolved recipe as tables: what applied, components in deployment order, findings."""
    crit = ", ".join(f"{k}={v}" for k, v in body["criteria"].items() if v not in ("any", 0))
    overlays = Sheet(
        escape(f"recipe {body['content_hash'][:12]} for {crit or 'any'}"), ["OVERLAY", "STATUS"]
    )
    for name in body["overlays"]["applied"]:
        overlays.rows.append([escape(name), "[green]applied[/]"])
    for ex in body["overlays"]["excluded"]:
        overlays.rows.append([escape(ex["name"]), f"[yellow]excluded[/]: {escape(ex['reason'])}"])
    components = Sheet(
        "components, in deployment order", ["#", "COMPONENT", "VERSION", "NAMESPACE"]
    )
    by_name = {c["name"]: c for c in body["components"]}
    for i, name in enumerate(body["deployment_order"], 1):
        c = by_name.get(name, {})
        components.rows.append(
            [
                str(i),
                escape(name),
                escape(str(c.get("version", "-"))),
                escape(str(c.get("namespace", "-"))),
            ]
        )
    sheets = [overlays, components]
    if body["findings"]:
        findings = Sheet("findings", ["SEVERITY", "RULE", "MESSAGE", "REMEDIATION"])
        for f in body["findings"]:
            findings.rows.append(
                [escape(f[k]) for k in ("severity", "rule", "message", "remediation")]
            )
        sheets.append(findings)
    return sheets


_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def drift_table(findings: list[dict], *, closed: bool = False, wide: bool = False) -> Sheet:
    """Drift findings, one row each, then what to do about each kind of them.

    `closed`: the list holds closed findings too (a CLOSED column, `open` for the others);
    `wide` adds each finding's id and the recipe it was judged by.
    """
    now = _now()
    headers = ["NODE", "SEVERITY", "KIND", "COMPONENT", "EXPECTED → OBSERVED", "SINCE"]
    if closed:
        headers.append("CLOSED")
    headers.append("FIX")
    if wide:
        headers += ["ID", "RECIPE"]
    still_open = sum(1 for f in findings if not f.get("closed_at"))
    if closed:
        title = f"{plural(len(findings), 'drift finding')}, {still_open} open"
    else:
        title = plural(len(findings), "open drift finding")
    sheet = Sheet(title, headers, fixed=("NODE", "SEVERITY", "SINCE", "CLOSED", "FIX"))
    fixes: dict[str, int] = {}
    for f in findings:
        style = _SEVERITY_STYLE.get(f["severity"], "")
        fix = fixes.setdefault(f["remediation"], len(fixes) + 1)
        cells = [
            escape(f["node"]),
            f"[{style}]{f['severity']}[/]" if style else escape(f["severity"]),
            escape(f["kind"]),
            escape(f["component"]),
            escape(f"{f['expected'] or '-'} → {f['observed']}"),
            _when(f["opened_at"], now),
        ]
        if closed:
            cells.append(_when(f["closed_at"], now) if f.get("closed_at") else "open")
        cells.append(escape(f"[{fix}]"))
        if wide:
            cells += [escape(f["id"]), escape(f["recipe_hash"][:12])]
        sheet.rows.append(cells)
    sheet.notes = [escape(f"[{n}] {text}") for text, n in fixes.items()]
    return sheet


# --- the SRE's view: `plumb node`, `plumb watch` ------------------------------------------------


def _cell(reading: object) -> str:
    """A fact reading for a table cell: its value, or (dim) why there is none."""
    text, ok = present.reading_text(reading)
    return escape(text) if ok else f"[dim]{escape(text)}[/]"


def _gpu_cell(gpu: dict, column: present.GpuColumn, found: dict[str, dict]) -> str:
    """The column's readings; in the colour of the worst finding that marks it, if any."""
    text = "/".join(
        escape(text) if ok else f"[dim]{escape(text)}[/]"
        for text, ok in present.gpu_cell(gpu, column.keys)
    )
    return _marked(text, present.column_finding(column, found))


def _marked(text: str, finding: dict | None) -> str:
    return f"[{_SEVERITY_STYLE[finding['severity']]}]{text}[/]" if finding else text


def _gpu_sheets(detail: dict, findings: list[dict], now: datetime) -> list[Sheet]:
    """The per-GPU tables of `plumb node`: inventory and links, then health (error totals,
    readings, recent XIDs), each cell coloured by the open finding it raised."""
    gpus = present.gpu_rows(detail)
    by_gpu = present.gpu_findings(findings)
    found = [by_gpu.get((g.get("index") or {}).get("value"), {}) for g in gpus]
    inventory = Sheet(plural(len(gpus), "GPU"), [c.header.upper() for c in present.GPU_COLUMNS])
    sick = sum(1 for f in found if f)
    health = Sheet(
        f"GPU health: {sick} of {plural(len(gpus), 'GPU')} with open findings",
        [c.header.upper() for c in present.HEALTH_COLUMNS] + ["RECENT XIDS", "FINDINGS"],
    )
    for gpu, mine in zip(gpus, found, strict=True):
        inventory.rows.append([_gpu_cell(gpu, c, mine) for c in present.GPU_COLUMNS])
        xids = [_marked(escape(t), f) for t, f in present.xid_texts(gpu, mine, now)]
        named = [
            f"[{_SEVERITY_STYLE[sev]}]{sev}[/]: {escape(names)}"
            for sev, names in present.findings_text(mine)
        ]
        health.rows.append(
            [_gpu_cell(gpu, c, mine) for c in present.HEALTH_COLUMNS]
            + [", ".join(xids) or "-", "; ".join(named) or "-"]
        )
    return [inventory, health]


def node_tables(detail: dict, findings: list[dict], history: list[dict]) -> list:
    """`plumb node NAME`: summary, every fact, the GPUs and their health, open findings,
    recent history."""
    from plumb.tree import leaves  # the wire model's protobuf: only this command needs it

    now = _now()
    styled = {
        "State": _STATUS_CELL[node_status(detail, now)],
        "Findings": _findings_cell(detail.get("findings") or {}),
    }
    head = Sheet(f"node {escape(detail['name'])}", ["KEY", "VALUE"], show_header=False)
    for key, value in present.summary_rows(detail, now):
        head.rows.append([f"[bold]{key}[/]", styled.get(key, escape(value))])
    facts = Sheet("facts", ["FACT", "VALUE"])
    for path, reading in leaves(detail.get("facts") or {}, skip=("gpus",)):
        facts.rows.append([escape(path), _cell(reading)])
    shown: list = [head, facts, *_gpu_sheets(detail, findings, now)]
    shown.append(drift_table(findings) if findings else "[green]no open drift findings[/]")
    title = f"{plural(len(history), 'recent change')}, newest first"
    shown.append(history_table(history, title=title))
    return shown


def watch_view(
    server: str,
    rows: list[dict],
    findings: list[dict],
    problem: str | None,
    last_ok: datetime | None = None,
) -> list:
    """One frame of `plumb watch`: the fleet (down, then most drifted first) and the open
    findings; while the aggregator cannot be reached, that error and when it last answered,
    and no tables, so an outage never reads as an empty, healthy fleet."""
    now = _now()
    header = f"[bold]plumb watch[/] {escape(server)} · {now:%H:%M:%S} UTC · Ctrl-C to quit"
    if problem:
        since = f"{last_ok:%H:%M:%S} UTC" if last_ok else "never"
        return [
            header,
            f"[bold red]ERROR[/] {escape(problem)}",
            f"last answer: {since}; retrying, the view is not current",
        ]
    ordered = sorted(
        rows, key=lambda r: (_STATUS_ORDER[node_status(r, now)], present.severity_order(r))
    )
    fleet = fleet_table(ordered)
    return [header, fleet, drift_table(findings)]


_STATUS_STYLE = {
    "pass": "green",
    "fail": "bold red",
    "error": "red",
    "warn": "yellow",
    "skip": "dim",
}


def validation_table(run: dict) -> Sheet:
    """A validation run: one row per node and check, then the totals and the verdict."""
    sheet = Sheet(
        escape(f"validation {run['id']} ({run['state']})"),
        ["NODE", "CHECK", "STATUS", "FIGURE", "MESSAGE"],
    )
    for r in run.get("results", []):
        style = _STATUS_STYLE.get(r["status"], "")
        figure = "-"
        if r["value"] is not None:
            figure = f"{r['value']:.1f} {r['unit'] or ''}".strip()
            if r["threshold"] is not None:
                figure += f" (min {r['threshold']:.1f})"
        sheet.rows.append(
            [
                escape(r["node"]),
                escape(r["check"]),
                f"[{style}]{r['status']}[/]",
                escape(figure),
                escape(r["message"]),
            ]
        )
    p = run["progress"]
    verdict = run["result"] or "running"
    colour = "green" if verdict == "passed" else "red" if verdict == "failed" else "yellow"
    sheet.notes.append(
        f"[{colour}]{verdict}[/]: {p['pass']} pass, {p['fail']} fail, {p['error']} error, "
        f"{p['warn']} warn, {p['skip']} skip, {p['pending']} pending of {p['total']}"
    )
    for w in p.get("waiting_for_gpus", []):
        sheet.notes.append(
            escape(
                f"{', '.join(w['checks'])} ({w['node']}) waits for the GPUs of "
                f"{', '.join(w['gpus_of'])}, held by {'; '.join(w['held_by'])}"
            )
        )
    return sheet


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


def nccl_table(runs: list[dict], source: str) -> Sheet:
    """`plumb nccl`: one row per run, then each run's hosts, versions and why it is not ok."""
    runs_text = plural(len(runs), "nccl-tests run")
    sheet = Sheet(
        escape(f"{runs_text} in {source} (GB/s; BUSBW: out of place, largest size)"),
        ["#", "TEST", "RANKS", "NODES", "GPU", "BUSBW", "AT", "AVG", "STATUS"],
    )
    for i, r in enumerate(runs, 1):
        sheet.rows.append(
            [
                str(i),
                escape(r["collective"] or "?"),
                "?" if r["ranks"] is None else str(r["ranks"]),
                str(len(r["nodes"])) if r["nodes"] else "?",
                escape(", ".join(sorted({_model(n["model"]) for n in r["nodes"]})) or "-"),
                "-" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:g}",
                _bytes(r["largest_bytes"]),
                "-" if r["avg_busbw_gbps"] is None else f"{r['avg_busbw_gbps']:g}",
                _RUN_STATUS[r["status"]],
            ]
        )
        if r["nodes"]:
            hosts = ", ".join(f"{n['host']} ({plural(n['gpus'], 'GPU')})" for n in r["nodes"])
            sheet.notes.append(escape(f"run {i} nodes: {hosts}"))
        versions = [
            f"{name} {r[key]}"
            for name, key in (("NCCL", "nccl_version"), ("nccl-tests", "nccl_tests_version"))
            if r[key]
        ]
        if versions:
            sheet.notes.append(escape(f"run {i} versions: {', '.join(versions)}"))
        sheet.notes += [escape(f"run {i} {r['status']}: {why}") for why in r["reasons"]]
    return sheet


def gate_table(g: dict) -> Sheet:
    """A pool's rollout gate (GET /v1/gates/{pool}): a line per canary, the reasons under it."""
    short = 16  # the validated-stack label's length
    state = "[green]open[/]" if g["state"] == "open" else "[red]closed[/]"
    sheet = Sheet(
        f"gate {escape(g['pool'])}: {state} ({plural(len(g['canaries']), 'canary', 'canaries')}"
        f" of {plural(g['nodes'], 'node')}; the pool runs {(g['pool_stack'] or '-')[:short]})",
        ["CANARY", "STACK", "VALIDATED AT", "BEFORE", "AGENT", "BLOCKING FINDINGS"],
        fixed=("CANARY", "STACK", "VALIDATED AT", "BEFORE", "AGENT"),
    )
    for c in g["canaries"]:
        blocking = ", ".join(f"{f['severity']} {f['kind']} {f['component']}" for f in c["blocking"])
        sheet.rows.append(
            [
                escape(c["node"]),
                (c["stack"] or "-")[:short],
                (c["validated_stack"] or "-")[:short],
                (c["previous_validated_stack"] or "-")[:short],
                "reporting" if c["connected"] else "[red]down[/]",
                escape(blocking) or "-",
            ]
        )
    sheet.notes = [escape(r) for r in g["reasons"]]
    return sheet


# --- what-if before a rollout: `plumb whatif` ---------------------------------------------------

_VERDICT_STYLE = {"blocked": "bold red", "review": "yellow", "safe": "green"}
_VERDICT_ORDER = ("blocked", "review", "safe")


def _verdict(verdict: str) -> str:
    style = _VERDICT_STYLE.get(verdict)
    return f"[{style}]{verdict}[/]" if style else escape(verdict)


def whatif_tables(body: dict) -> list[Sheet]:
    """A what-if answer (POST /v1/whatif): each pool's verdict, each node's with what would
    change on it, then every rule that decided, once for all the nodes it holds on."""
    plan = ", ".join(f"{c} {v}" for c, v in body["plan"].items())
    nodes = [n | {"pool": p["pool"]} for p in body["pools"] for n in p["nodes"]]
    pools = Sheet(
        escape(f"what-if {plan}: ") + _verdict(body["verdict"]),
        ["POOL", "VERDICT", "NODES"],
        fixed=("POOL", "VERDICT"),
    )
    for p in body["pools"]:
        counts = [sum(n["verdict"] == v for n in p["nodes"]) for v in _VERDICT_ORDER]
        tally = ", ".join(f"{c} {v}" for c, v in zip(counts, _VERDICT_ORDER, strict=True) if c)
        pools.rows.append([escape(p["pool"]), _verdict(p["verdict"]), tally])
    per_node = Sheet(
        "nodes", ["NODE", "POOL", "VERDICT", "CHANGE", "DECIDED BY"], fixed=("NODE", "VERDICT")
    )
    held: dict[tuple, list[str]] = {}
    for n in nodes:
        change = ", ".join(
            f"{c['component']} {c['current'] or '-'} → {c['planned']}" for c in n["changes"]
        )
        rules = ", ".join(d["rule"] for d in n["decisions"] if d["verdict"] == n["verdict"])
        per_node.rows.append(
            [escape(n["node"]), escape(n["pool"]), _verdict(n["verdict"]), escape(change),
             escape(rules) or "-"]
        )  # fmt: skip
        for d in n["decisions"]:
            key = (d["verdict"], d["rule"], d["reason"], d["fix"], d["source"], d["already"])
            held.setdefault(key, []).append(n["node"])
    sheets = [pools, per_node]
    if held:
        decided = Sheet(
            "rules that decided (already: holds on the live facts too)",
            ["VERDICT", "RULE", "NODES", "REASON", "FIX", "SOURCE"],
            fixed=("VERDICT",),
        )
        order = {v: i for i, v in enumerate(_VERDICT_ORDER)}
        for (verdict, rule, reason, fix, source, already), names in sorted(
            held.items(), key=lambda kv: (order.get(kv[0][0], 3), kv[0][1], kv[0][2])
        ):
            shown = ", ".join(names) if len(names) <= 3 else plural(len(names), "node")
            decided.rows.append(
                [_verdict(verdict), escape(rule), escape(shown),
                 escape(reason + (" (already)" if already else "")), escape(fix), escape(source)]
            )  # fmt: skip
        sheets.append(decided)
    return sheets
