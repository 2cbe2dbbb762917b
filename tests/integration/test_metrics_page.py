"""A live `plumb serve` /metrics page with nodes: clean for `promtool check metrics`, GPU series
joinable with dcgm-exporter's, counts as gauges, and the process's own series.

Expected GPU labels are written by hand from tests/data/real/qx-b200.xml (GPU 0) and from
dcgm-exporter's label names (`gpu`, `UUID`, `pci_bus_id`; `model_name` as in its NVLink series).
A scrape that takes gzip (Prometheus's do) gets the page as one gzip stream (RFC 1952).
"""

from __future__ import annotations

import shutil
import subprocess
import zlib
from pathlib import Path

import httpx
import pytest
from conftest import BIN, ENV, scrape, stop, until

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "real" / "qx-b200.xml"

pytestmark = pytest.mark.integration


@pytest.fixture
def b200(aggregator, tmp_path):
    """The B200 capture replayed as node `b200`, plus a simulated H100 node beside it."""
    capture = tmp_path / "b200.xml"
    shutil.copy(CAPTURE, capture)
    log = (tmp_path / "agent-b200.log").open("a")
    argv = [str(BIN / "plumb-agent"), "--aggregator", aggregator.grpc, "--node-name", "b200"]
    proc = subprocess.Popen(
        [*argv, "--simulate", str(capture)], stdout=log, stderr=subprocess.STDOUT, env=ENV
    )
    yield aggregator
    stop(proc)


def test_the_page_with_nodes_passes_promtool_check_metrics(b200, start_agent):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (.ci/run installs Prometheus)")
    h100 = start_agent(b200, "h100", "dgx-h100")
    until(lambda: len(b200.json("/v1/nodes")) == 2, what="both nodes")
    # A driver off its recipe, so the page has drift series too (the demo's upgrade).
    h100.edit(lambda spec: spec["driver"].update(version="595.45.04"))
    until(lambda: b200.json("/v1/drift", severity="critical"), what="critical drift")
    page = b200.get("/metrics").text
    assert "plumb_gpu_info{" in page and "plumb_node_drift{" in page
    result = subprocess.run(
        [promtool, "check", "metrics"], input=page, capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_gpu_series_join_dcgm_exporter_s_counts_are_gauges_and_the_process_shows(b200):
    until(lambda: b200.node("b200"), what="the replayed B200 node")
    samples = scrape(b200)
    gpus = {lb["gpu"]: lb for name, lb, _ in samples if name == "plumb_gpu_info"}
    assert len(gpus) == 8
    assert gpus["0"] == {
        "node": "b200",
        "gpu": "0",
        "UUID": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:8F:00.0",
        "model_name": "NVIDIA B200",
    }
    assert gpus["1"]["pci_bus_id"] == "00000000:90:00.0"
    assert ("plumb_node_gpus", {"node": "b200"}, 8.0) in samples
    (info,) = [lb for name, lb, _ in samples if name == "plumb_node_info"]
    assert "gpu_count" not in info
    names = {name for name, _, _ in samples}
    assert {
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
        "python_info",
    } <= names


def test_a_scrape_that_takes_gzip_gets_the_same_page_as_one_gzip_stream(b200):
    until(lambda: b200.node("b200"), what="the replayed B200 node")
    # Prometheus's own request header; raw bytes, so nothing here decodes them for us.
    with httpx.stream("GET", b200.url + "/metrics", headers={"Accept-Encoding": "gzip"}) as r:
        body = b"".join(r.iter_raw())
    assert (r.status_code, r.headers["content-encoding"], r.headers["vary"]) == (
        200,
        "gzip",
        "Accept-Encoding",
    )
    assert int(r.headers["content-length"]) == len(body)
    one_member = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = one_member.decompress(body).decode()
    assert one_member.eof and one_member.unused_data == b""
    plain = httpx.get(b200.url + "/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in plain.headers

    def node_lines(page: str) -> list[str]:
        # The process's own series and the report times move between two scrapes.
        return [
            line
            for line in page.splitlines()
            if 'node="' in line and not line.startswith("plumb_node_last_report")
        ]

    assert 'node="b200"' in text and len(node_lines(text)) > 8
    assert node_lines(text) == node_lines(plain.text)
