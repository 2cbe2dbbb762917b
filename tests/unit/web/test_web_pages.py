"""The web page's HTML, from canned API rows: order, drift marking, escaping, fragments."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from plumb.aggregator.web.pages import Account, fleet_page, login_page, node_page

API = json.loads((Path(__file__).parents[1] / "cli" / "data" / "api.json").read_text())
NOW = datetime(2026, 7, 1, 3, 0, 0, tzinfo=UTC)


def test_the_overview_lists_drifted_nodes_first_and_marks_them() -> None:
    html = fleet_page(API["/v1/nodes"], API["/v1/drift"], NOW)
    order = [html.index(f'data-node="{n}"') for n in ("node-b", "node-a", "node-c")]
    assert order == sorted(order)
    assert '<tr class="node critical" data-node="node-b" data-drifted="true">' in html
    assert "Roll the node to the recipe&#x27;s driver" in html  # remediation, escaped
    assert 'data-fragment="/ui/fleet"' in html and "/static/app.js" in html
    assert "50m ago" in html  # node-c's age, rendered server-side


def test_a_fragment_is_only_the_main_content() -> None:
    fragment = fleet_page(API["/v1/nodes"], [], NOW, fragment=True)
    assert "<html" not in fragment and 'data-node="node-b"' in fragment


def test_node_values_are_escaped() -> None:
    row = dict(API["/v1/nodes"][0], name='<script>alert("x")</script>', driver_version="<b>")
    html = fleet_page([row], [], NOW)
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<td>&lt;b&gt;</td>" in html
    assert 'href="/nodes/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"' in html


def test_the_node_page_shows_gpus_findings_and_a_timeline() -> None:
    detail = API["/v1/nodes/node-b"]
    html = node_page(detail, API["/v1/nodes/node-b/drift"], API["/v1/nodes/node-b/history"], NOW)
    assert html.count("GPU-") == 8
    assert 'data-drifted="true"' in html
    assert "<code>driver.driver_version</code> 580.173.02 → <b>595.45.04</b>" in html
    assert 'data-fragment="/ui/nodes/node-b"' in html


def test_the_node_page_marks_the_xids_and_counters_that_opened_a_finding() -> None:
    detail = API["/v1/nodes/node-b"]
    html = node_page(detail, API["/v1/nodes/node-b/drift"], API["/v1/nodes/node-b/history"], NOW)
    assert "<h2>GPU health <small>2 of 8 with open findings</small></h2>" in html
    # GPU 3 fell off the bus 30 s before NOW; its sensors no longer read.
    assert (
        '<span class="marked critical" title="gpu3/xid-79: XID 79: GPU has fallen off the bus">'
        "79 ×1 (30s ago)</span>"
    ) in html
    assert '<tr data-gpu="3"><td>3</td><td>1</td>' in html
    # GPU 5: a row marked for remapping (XID 63) and one remap pending, both warnings.
    assert '<td class="marked warning" title="gpu5/remap-pending: 1">1/0</td>' in html
    assert '<span class="marked warning" title="gpu5/xid-63: XID 63: ECC page' in html
    assert html.count('class="marked ') == 3
    assert '<tr data-gpu="0"><td>0</td><td>0</td><td>0/0</td><td>0</td><td>0/0</td>' in html
    assert '<td>33</td><td>71</td><td>0</td><td class="xids">-</td></tr>' in html


def test_a_finding_in_a_tooltip_is_escaped() -> None:
    detail = API["/v1/nodes/node-b"]
    finding = dict(API["/v1/nodes/node-b/drift"][0], observed='XID 79: <img src=x>"')
    html = node_page(detail, [finding], [], NOW)
    assert 'title="gpu3/xid-79: XID 79: &lt;img src=x&gt;&quot;"' in html
    assert "<img src=x>" not in html


def test_the_header_names_the_signed_in_account_escaped_with_its_log_out_form() -> None:
    account = Account('proxy:<img src=x onerror="alert(1)">', "read", csrf="c-s-r-f")
    html = fleet_page([], [], NOW, account=account)
    assert "<img" not in html and "proxy:&lt;img src=x" in html
    assert '<form class="account" method="post" action="/logout">' in html
    assert '<input type="hidden" name="csrf" value="c-s-r-f">' in html
    assert '<meta name="plumb-csrf" content="c-s-r-f">' in html
    proxied = fleet_page([], [], NOW, account=Account("proxy:alice", "read"))
    assert "proxy:alice · read" in proxied and "/logout" not in proxied
    assert "plumb-csrf" not in proxied


def test_the_sign_in_form_keeps_where_to_go_escaped_and_shows_its_error() -> None:
    html = login_page('/nodes/"><script>', NOW, error="That token is not known.")
    assert '<input type="hidden" name="next" value="/nodes/&quot;&gt;&lt;script&gt;">' in html
    assert '<p class="error" id="login-error" role="alert">That token is not known.</p>' in html
    assert 'type="password" id="token" name="token"' in html
    assert "login-error" not in login_page("/", NOW)


def test_the_overview_shows_change_events_with_the_findings_they_opened() -> None:
    finding = dict(API["/v1/drift"][0], component="driver", severity="critical")
    event = {
        "summary": "driver.driver_version 580.173.02 → 595.45.04 on 2 of 3 nodes of eks/h100",
        "started_at": "2026-07-01T02:10:00Z",
        "opened": [finding],
        "closed": [],
    }
    html = fleet_page(API["/v1/nodes"], [], NOW, changes=[event])
    assert "<h2>Changes <small>" in html
    assert '<time datetime="2026-07-01T02:10:00Z">' in html
    assert "580.173.02 → 595.45.04 on 2 of 3 nodes of eks/h100" in html
    assert '<span class="badge critical">opened driver</span>' in html


def test_the_overview_says_why_it_shows_no_changes() -> None:
    html = fleet_page(API["/v1/nodes"], [], NOW, changes="the timeline needs the database")
    assert '<p class="none">the timeline needs the database</p>' in html
    assert '<p class="none">No fact changed.</p>' in fleet_page([], [], NOW)
