"""The web page in a real headless Chromium, against a real aggregator with simulated nodes.

Chromium (Debian's `chromium`, shared/reference/infra.md §7) loads `/` and a node page; with
`--virtual-time-budget` the page's script runs and re-fetches its live fragment before
`--dump-dom` prints the DOM. A screenshot of each page is saved under the test's tmp dir and,
when PLUMB_ARTIFACTS is set, copied there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import httpx
from cdp import HEADLESS, chromium_binary
from conftest import Aggregator, until

DRIFTED_DRIVER = "595.45.04"


def chromium(url: str, *mode: str, window: str = "1400,900") -> str:
    """Run headless Chromium on `url` once; stdout is the DOM with --dump-dom."""
    binary = chromium_binary()
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                binary,
                *HEADLESS,
                f"--user-data-dir={profile}",
                f"--window-size={window}",
                "--virtual-time-budget=5000",  # enough for the script's first refreshes
                *mode,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(url: str, path: Path, window: str) -> Path:
    chromium(url, f"--screenshot={path}", window=window)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("PLUMB_ARTIFACTS"):
        target = Path(os.environ["PLUMB_ARTIFACTS"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target / path.name)
    return path


class Rows(HTMLParser):
    """The node rows of the overview (data-node, data-drifted, class, text), in page order."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.body: dict[str, str | None] = {}
        self._row: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "tr" and "data-node" in a:
            self._row = {**a, "text": ""}
            self.rows.append(self._row)

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self._row["text"] += data


def parse(dom: str) -> Rows:
    parser = Rows()
    parser.feed(dom)
    return parser


def test_the_drifted_node_shows_as_drifted_and_first(
    aggregator: Aggregator, start_agent, tmp_path: Path
) -> None:
    agents = {
        name: start_agent(aggregator, name, profile)
        for name, profile in (
            ("eks-h100-1", "dgx-h100"),
            ("eks-h100-2", "dgx-h100"),
            ("eks-h100-3", "dgx-h100"),
            ("gke-a100-1", "hgx-a100"),
        )
    }
    until(lambda: len(aggregator.json("/v1/nodes")) == 4, what="four nodes")
    agents["eks-h100-2"].edit(lambda spec: spec["driver"].update(version=DRIFTED_DRIVER))
    until(
        lambda: aggregator.json("/v1/drift", node="eks-h100-2", severity="critical"),
        what="a critical finding on eks-h100-2",
    )

    fleet_dom = chromium(aggregator.url + "/", "--dump-dom")
    page = parse(fleet_dom)
    assert int(page.body.get("data-refreshed") or 0) >= 1, "the live refresh never ran"
    names = [r["data-node"] for r in page.rows]
    assert sorted(names) == sorted(agents)
    first = page.rows[0]
    assert first["data-node"] == "eks-h100-2", names
    assert first["data-drifted"] == "true" and "critical" in (first["class"] or "")
    assert "drifted" in first["text"] and DRIFTED_DRIVER in first["text"]
    for row in page.rows[1:]:
        assert row["data-drifted"] == "false" and "in line" in row["text"], row
    # The fleet's change timeline: the driver move on one of the pool's three H100 nodes.
    assert f"→ {DRIFTED_DRIVER} on 1 of 3 nodes" in fleet_dom

    node_dom = chromium(aggregator.url + "/nodes/eks-h100-2", "--dump-dom")
    assert 'data-drifted="true"' in node_dom
    # The remediation of its critical finding: the fabric manager the upgrade left behind.
    assert "install and start nvidia-fabricmanager" in node_dom
    assert f"<b>{DRIFTED_DRIVER}</b>" in node_dom  # in findings and the history timeline
    assert node_dom.count("GPU-") >= 8  # the per-GPU table

    screenshot(aggregator.url + "/", tmp_path / "plumb-web-fleet.png", "1400,900")
    screenshot(aggregator.url + "/nodes/eks-h100-2", tmp_path / "plumb-web-node.png", "1400,1100")


def test_the_page_reads_without_javascript_and_is_read_only(
    aggregator: Aggregator, start_agent
) -> None:
    start_agent(aggregator, "solo", "l4")
    until(lambda: aggregator.node("solo"), what="the node")
    html = aggregator.get("/").text
    assert 'data-node="solo"' in html and "<table" in html  # server-rendered, no JS needed
    assert aggregator.get("/nodes/solo").status_code == 200
    assert aggregator.get("/nodes/missing").status_code == 404
    assert aggregator.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert aggregator.get("/static/../core.py").status_code in (400, 404, 422)
    for path in ("/", "/ui/fleet", "/nodes/solo"):
        assert httpx.post(aggregator.url + path, timeout=5).status_code == 405
