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
