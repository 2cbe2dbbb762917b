"""The web page's HTML: the fleet overview and a node page, as plain strings.

Pure functions of the same JSON the API returns, so the page reads fully without JavaScript;
`static/app.js` only re-fetches the `<main>` fragment (`fragment=True`) to keep it live.
Every value from a node passes through `html.escape`: facts are whatever an agent reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from urllib.parse import quote

from plumb.aggregator import present
from plumb.aggregator.present import SEVERITIES, age, severity_order
from plumb.tree import leaves

__all__ = [
    "Account",
    "fleet_page",
    "login_page",
    "node_page",
    "not_found_page",
    "severity_order",
]

REFRESH_MS = 2000  # the page re-fetches its fragment this often; a finding shows within ~2 s


@dataclass(frozen=True)
class Account:
    """Who the page is shown to, for its header: a web session has a CSRF secret (and so a
    log-out button); a user an auth proxy named has none (its proxy signs out)."""

    name: str
    scope: str
    csrf: str | None = None


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def _state(row: dict) -> str:
    """`critical`, `warning`, `info` (the worst open finding), `down`, or `ok`."""
    found = present.worst(row.get("findings") or {})
    if found:
        return found
    return "ok" if row.get("connected") else "down"


def _badges(counts: dict[str, int]) -> str:
    parts = [
        f'<span class="badge {s}">{n} {s}</span>' for s in SEVERITIES if (n := counts.get(s, 0))
    ]
    return " ".join(parts) or '<span class="badge ok">in line</span>'


def _status(row: dict) -> str:
    """The node's state in words: what a screen reader and the DOM test read."""
    if row.get("drifted"):
        label = "drifted"
    else:
        label = "in line"
    conn = "connected" if row.get("connected") else "disconnected"
    return f'<span class="status {e(_state(row))}">{label}</span><span class="conn">{conn}</span>'


def _gpus(row: dict) -> str:
    return e(present.gpus_text(row.get("gpu_count") or 0, row.get("gpu_product")))


def _link(name: str) -> str:
    return f'<a href="/nodes/{quote(name, safe="")}">{e(name)}</a>'


def _account(account: Account | None) -> tuple[str, str]:
    """The header's sign-in block and the <meta> the page's own state changes read."""
    if account is None:
        return "", ""
    who = f'<span class="who">{e(account.name)} · {e(account.scope)}</span>'
    if account.csrf is None:
        return f'<span class="account">{who}</span>', ""
    return (
        f'<form class="account" method="post" action="/logout">{who}'
        f'<input type="hidden" name="csrf" value="{e(account.csrf)}">'
        '<button type="submit" id="logout">Log out</button></form>',
        f'<meta name="plumb-csrf" content="{e(account.csrf)}">\n',
    )


def _layout(
    title: str, body: str, fragment_url: str, now: datetime, account: Account | None = None
) -> str:
    signed_in, meta = _account(account)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{meta}<title>{e(title)} · Plumb</title>
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<header class="top">
  <a class="brand" href="/">Plumb</a>
  <span class="tagline">live GPU software stack</span>
  <span id="live" class="live" data-state="static">as of {e(present.clock(now))}</span>
  {signed_in}
</header>
<main id="content" data-fragment="{e(fragment_url)}" data-refresh-ms="{REFRESH_MS}">
{body}
</main>
</body>
</html>
"""


def _fleet_body(
    rows: list[dict], findings: list[dict], changes: Sequence[dict] | str, now: datetime
) -> str:
    rows = sorted(rows, key=severity_order)
    drifted = [r for r in rows if r.get("drifted")]
    connected = sum(1 for r in rows if r.get("connected"))
    critical = sum((r.get("findings") or {}).get("critical", 0) for r in rows)
    pools: dict[str, list[dict]] = {}
    for r in rows:
        pools.setdefault(r.get("pool") or "unresolved", []).append(r)
    cards = "".join(
        f'<div class="card {cls}"><div class="num">{n}</div><div class="lbl">{lbl}</div></div>'
        for n, lbl, cls in (
            (len(rows), "nodes", ""),
            (connected, "agents connected", "" if connected == len(rows) else "warning"),
            (len(drifted), "nodes drifted", "critical" if drifted else "ok"),
            (critical, "critical findings", "critical" if critical else "ok"),
            (len(pools), "pools", ""),
        )
    )
    pool_rows = "".join(
        f"<tr><td><code>{e(pool)}</code></td><td>{len(members)}</td>"
        f"<td>{_pool_drift(members)}</td>"
        f"<td>{e(', '.join(sorted({m['driver_version'] or '-' for m in members})))}</td></tr>"
        for pool, members in sorted(pools.items())
    )
    node_rows = "".join(
        f'<tr class="node {e(_state(r))}" data-node="{e(r["name"])}" '
        f'data-drifted="{"true" if r.get("drifted") else "false"}">'
        f"<td>{_link(r['name'])}</td><td>{_status(r)}</td>"
        f"<td><code>{e(r.get('pool') or '-')}</code></td><td>{_gpus(r)}</td>"
        f"<td>{e(r['driver_version'] or '-')}</td><td>{e(r['cuda_driver_version'] or '-')}</td>"
        f"<td>{e(r.get('nccl_version') or '-')}</td>"
        f"<td>{_badges(r.get('findings') or {})}</td>"
        f"<td>{e(age(r['last_report_at'], now))}</td></tr>"
        for r in rows
    )
    urgent = [f for f in findings if f["severity"] != "info"]
    return f"""
<section class="cards">{cards}</section>
<section>
<h2>Nodes <small>drifted first</small></h2>
<table class="nodes">
<thead><tr><th>Node</th><th>State</th><th>Pool</th><th>GPUs</th><th>Driver</th><th>CUDA</th>
<th>NCCL</th><th>Open findings</th><th>Last report</th></tr></thead>
<tbody>{node_rows or '<tr><td colspan="9">No agent has reported yet.</td></tr>'}</tbody>
</table>
</section>
<section>
<h2>Pools <small>nodes with the same resolved criteria</small></h2>
<table class="pools">
<thead><tr><th>Pool</th><th>Nodes</th><th>Drifted</th><th>Driver versions</th></tr></thead>
<tbody>{pool_rows}</tbody>
</table>
</section>
<section>
<h2>Open findings <small>critical and warning</small></h2>
{_findings_list(urgent, with_node=True)}
</section>
<section>
<h2>Changes <small>across the fleet, last 24 hours, newest first</small></h2>
{_fleet_changes(changes)}
</section>
"""


def _fleet_changes(changes: Sequence[dict] | str) -> str:
    """Change events (GET /v1/changes), or why they could not be read."""
    if isinstance(changes, str):
        return f'<p class="none">{e(changes)}</p>'
    items = "".join(
        f'<li class="event"><time datetime="{e(c["started_at"])}">'
        f"{e(present.clock(c['started_at']))}</time><ul><li>{e(c['summary'])}"
        + "".join(
            f' <span class="badge {e(f["severity"])}">opened {e(f["component"])}</span>'
            for f in c["opened"]
        )
        + "".join(f' <span class="badge ok">closed {e(f["component"])}</span>' for f in c["closed"])
        + "</li></ul></li>"
        for c in changes
    )
    if not items:
        return '<p class="none">No fact changed.</p>'
    return f'<ol class="timeline">{items}</ol>'


def _pool_drift(members: list[dict]) -> str:
    n = sum(1 for m in members if m.get("drifted"))
    return f'<span class="badge critical">{n}</span>' if n else "0"


def _findings_list(findings: Iterable[dict], *, with_node: bool) -> str:
    items = "".join(
        f'<li class="finding {e(f["severity"])}">'
        f'<div class="what"><span class="badge {e(f["severity"])}">{e(f["severity"])}</span> '
        + (f"{_link(f['node'])} · " if with_node else "")
        + f"{e(f['kind'])} · <code>{e(f['component'])}</code>: "
        f"expected <b>{e(f['expected'] or '-')}</b>, observed <b>{e(f['observed'])}</b>"
        f' <span class="since">since {e(present.clock(f["opened_at"]))}</span></div>'
        f'<div class="fix">{e(f["remediation"])}</div></li>'
        for f in findings
    )
    return f'<ul class="findings">{items}</ul>' if items else '<p class="none">None open.</p>'


def fleet_page(
    rows: list[dict],
    findings: list[dict],
    now: datetime,
    *,
    changes: Sequence[dict] | str = (),
    fragment: bool = False,
    account: Account | None = None,
) -> str:
    """The fleet overview: summary cards, nodes (drifted first), pools, open findings and
    change events (or, as a string, why there are none to show)."""
    body = _fleet_body(rows, findings, changes, now)
    return body if fragment else _layout("Fleet", body, "/ui/fleet", now, account)


def _text(text: str, ok: bool) -> str:
    return e(text) if ok else f'<span class="na">{e(text)}</span>'


def _reading(reading: object) -> str:
    return _text(*present.reading_text(reading))


def _marks(finding: dict | None) -> str:
    """A cell's class and tooltip when an open finding marks it: its severity and what it saw."""
    if finding is None:
        return ""
    what = f"{finding['component']}: {finding['observed']}"
    return f' class="marked {e(finding["severity"])}" title="{e(what)}"'


def _gpu_cell(gpu: dict, column: present.GpuColumn, found: dict[str, dict]) -> str:
    text = "/".join(_text(t, ok) for t, ok in present.gpu_cell(gpu, column.keys))
    return f"<td{_marks(present.column_finding(column, found))}>{text}</td>"


def _gpu_tables(detail: dict, findings: list[dict], now: datetime) -> str:
    """The GPUs as they are, then their health: error totals, readings and recent XIDs, each
    cell marked by the open finding it raised."""
    gpus = present.gpu_rows(detail)
    by_gpu = present.gpu_findings(findings)
    found = [by_gpu.get((g.get("index") or {}).get("value"), {}) for g in gpus]
    head = "".join(f"<th>{e(c.header)}</th>" for c in present.GPU_COLUMNS)
    rows = "".join(
        "<tr>" + "".join(_gpu_cell(g, c, mine) for c in present.GPU_COLUMNS) + "</tr>"
        for g, mine in zip(gpus, found, strict=True)
    )
    health_head = "".join(f"<th>{e(c.header)}</th>" for c in present.HEALTH_COLUMNS)
    health_rows = []
    for g, mine in zip(gpus, found, strict=True):
        xids = " ".join(
            f"<span{_marks(f)}>{e(text)}</span>" for text, f in present.xid_texts(g, mine, now)
        )
        health_rows.append(
            f'<tr data-gpu="{e((g.get("index") or {}).get("value"))}">'
            + "".join(_gpu_cell(g, c, mine) for c in present.HEALTH_COLUMNS)
            + f'<td class="xids">{xids or "-"}</td></tr>'
        )
    sick = sum(1 for f in found if f)
    return f"""<section><h2>{len(gpus)} GPUs</h2>
<div class="scroll"><table class="gpus"><thead><tr>{head}</tr></thead>
<tbody>{rows}</tbody></table></div></section>
<section><h2>GPU health <small>{sick} of {len(gpus)} with open findings</small></h2>
<div class="scroll"><table class="gpus health"><thead><tr>{health_head}<th>Recent XIDs</th>
</tr></thead><tbody>{"".join(health_rows)}</tbody></table></div></section>"""


def _value(change: dict | None) -> str:
    if change is None:
        return "—"
    if change.get("status") != "ok":
        return str(change.get("status"))
    return str(change.get("value"))


def _timeline(history: list[dict]) -> str:
    """Changes grouped by the report that carried them; a first report collapses to one line."""
    events: dict[str, list[dict]] = {}
    for change in history:
        events.setdefault(change["at"], []).append(change)
    items = []
    for at, changes in events.items():
        first = all(c["old"] is None for c in changes) and len(changes) > 3
        if first:
            body = f"<li>first report: {len(changes)} facts</li>"
        else:
            body = "".join(
                f"<li><code>{e(c['path'])}</code> {e(_value(c['old']))} → "
                f"<b>{e(_value(c['new']))}</b></li>"
                for c in changes
            )
        items.append(
            f'<li class="event"><time datetime="{e(at)}">{e(present.clock(at))}</time>'
            f"<ul>{body}</ul></li>"
        )
    if not items:
        return '<p class="none">No changes stored.</p>'
    return f'<ol class="timeline">{"".join(items)}</ol>'


def _node_body(detail: dict, findings: list[dict], history: list[dict], now: datetime) -> str:
    facts = detail.get("facts") or {}
    styled = {"State": _status(detail), "Findings": _badges(detail.get("findings") or {})}
    summary = [
        (k, styled[k] if k in styled else e(v)) for k, v in present.summary_rows(detail, now)
    ]
    summary_rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in summary)
    fact_rows = "".join(
        f"<tr><th><code>{e(path)}</code></th><td>{_reading(r)}</td></tr>"
        for path, r in leaves(facts, skip=("gpus",))
    )
    state = _state(detail)
    return f"""
<p class="crumbs"><a href="/">Fleet</a> / {e(detail["name"])}</p>
<h1 class="node-title {e(state)}" data-node="{e(detail["name"])}"
    data-drifted="{"true" if detail.get("drifted") else "false"}">{e(detail["name"])}
 {_badges(detail.get("findings") or {})}</h1>
<div class="split">
<section><h2>Summary</h2><table class="kv">{summary_rows}</table></section>
<section><h2>Open findings</h2>{_findings_list(findings, with_node=False)}</section>
</div>
{_gpu_tables(detail, findings, now)}
<div class="split">
<section><h2>History <small>newest first</small></h2>{_timeline(history)}</section>
<section><h2>Every fact</h2><table class="kv facts">{fact_rows}</table></section>
</div>
"""


def node_page(
    detail: dict,
    findings: list[dict],
    history: list[dict],
    now: datetime,
    *,
    fragment: bool = False,
    account: Account | None = None,
) -> str:
    """One node: summary, open findings with remediation, GPUs and their health, history
    timeline, facts."""
    body = _node_body(detail, findings, history, now)
    url = f"/ui/nodes/{quote(detail['name'], safe='')}"
    return body if fragment else _layout(detail["name"], body, url, now, account)


def not_found_page(message: str, now: datetime, account: Account | None = None) -> str:
    body = f'<p class="crumbs"><a href="/">Fleet</a></p><h1>Not found</h1><p>{e(message)}</p>'
    return _layout("Not found", body, "", now, account)


def login_page(next_path: str, now: datetime, error: str | None = None) -> str:
    """The sign-in form: an API token in, a session cookie out (web/login.py)."""
    problem = f'<p class="error" id="login-error" role="alert">{e(error)}</p>' if error else ""
    body = f"""
<section class="login">
<h1>Sign in</h1>
<p>Paste your API token: the <code>TOKEN</code> of your line in the aggregator's tokens file.</p>
{problem}<form method="post" action="/login" id="login">
<input type="hidden" name="next" value="{e(next_path)}">
<label for="token">Token</label>
<input type="password" id="token" name="token" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
</section>
"""
    return _layout("Sign in", body, "", now)
