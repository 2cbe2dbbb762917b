"""Signing in to the web page in a real headless Chromium, with auth on as the chart sets it
(no anonymous read): `/` lands on the form, a wrong token is told so, the right one shows the
fleet, and logging out returns to the form. Screenshots go where test_web_page.py puts its."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cdp import Browser
from conftest import READ_TOKEN, Aggregator, until


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Aggregator]:
    agg = Aggregator(tmp_path, extra_env={"PLUMB_API__ANONYMOUS_READ": "false"}).start()
    yield agg
    agg.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    chromium = Browser(tmp_path / "chromium.log")
    yield chromium
    chromium.close()


def _nodes(agg: Aggregator) -> list[str]:
    resp = httpx.get(
        agg.url + "/v1/nodes", headers={"Authorization": f"Bearer {READ_TOKEN}"}, timeout=5
    )
    resp.raise_for_status()
    return [n["name"] for n in resp.json()]


def test_sign_in_shows_the_fleet_and_log_out_returns_to_the_form(
    secured: Aggregator, start_agent, browser: Browser, tmp_path: Path
) -> None:
    start_agent(secured, "l4-node-1", "l4")
    until(lambda: _nodes(secured) == ["l4-node-1"], what="the node")

    browser.open(secured.url + "/")
    browser.wait_for(
        "location.pathname === '/login' && !!document.querySelector('#token')",
        what="the sign-in form",
    )
    assert browser.evaluate("location.search") == "?next=/"
    browser.screenshot(tmp_path / "plumb-web-login.png")

    browser.type_into("#token", "not-a-token-this-aggregator-knows")
    browser.click("#login button[type=submit]")
    error = browser.wait_for(
        "document.querySelector('#login-error')?.textContent", what="the form's error"
    )
    assert error == "That token is not known."
    assert browser.evaluate("document.querySelector('#token').value") == ""

    browser.type_into("#token", READ_TOKEN)
    browser.click("#login button[type=submit]")
    browser.wait_for(
        "location.pathname === '/' && !!document.querySelector('tr[data-node]')",
        what="the fleet page",
    )
    rows = browser.evaluate(
        "[...document.querySelectorAll('tr[data-node]')].map(r => r.dataset.node)"
    )
    assert rows == ["l4-node-1"]
    assert browser.evaluate("document.querySelector('.account .who').textContent") == (
        "test-read · read"
    )
    assert browser.evaluate("document.cookie") == ""  # HttpOnly: no script sees the session
    # The page's live refresh runs on the session too (a 401 would send it back to /login).
    browser.wait_for("Number(document.body.dataset.refreshed || 0) >= 1", what="a live refresh")
    browser.screenshot(tmp_path / "plumb-web-signed-in.png")

    browser.click("#logout")
    browser.wait_for(
        "location.pathname === '/login' && !!document.querySelector('#token')",
        what="the form after logging out",
    )
    browser.open(secured.url + "/nodes/l4-node-1")
    browser.wait_for(
        "location.pathname === '/login' && location.search === '?next=/nodes/l4-node-1'",
        what="the form again: the session is gone",
    )
