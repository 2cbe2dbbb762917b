"""`ai-service-metrics` against a real Prometheus scraping dcgm-exporter-shaped pages.

dcgm-exporter needs a GPU, so each node's exporter is a static /metrics page on loopback,
written by hand in its exposition format (shared/reference/peers.md §3.1: field names,
labels); Prometheus scrapes them for real. node-a's page names its node in `Hostname` (the
exporter's releases), node-b's in `hostname` (its main) and lacks DCGM_FI_DEV_POWER_USAGE.
node-d's page has every series but only DCGM's placeholders in them (NVIDIA/DCGM
dcgmlib/dcgm_structs.h: DCGM_INT64_BLANK = 0x7ffffffffffffff0 = 9223372036854775792 and
NOT_SUPPORTED = BLANK + 2; DCGM_FP64_BLANK = 2**47 = 140737488355328 for the power, a double).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import free_port, stop, until
from prom_fixture import Prometheus, start_prometheus

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.validation.prometheus import Prometheus as Target
from plumb.aggregator.validation.prometheus import run_query_check

LABELS = (
    'gpu="0",UUID="GPU-5c6a7b3e-1f0d-4c2a-9e8b-2d4f6a8c0e12",pci_bus_id="00000000:18:00.0",'
    'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",{host}="{node}",'
    'DCGM_FI_DRIVER_VERSION="535.104.05"'
)
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %).", "37"),
    "DCGM_FI_DEV_FB_USED": ("Framebuffer memory used (in MiB).", "40960"),
    "DCGM_FI_DEV_GPU_TEMP": ("GPU temperature (in C).", "41"),
    "DCGM_FI_DEV_POWER_USAGE": ("Power draw (in W).", "312.5"),
}


BLANKS = {
    "DCGM_FI_DEV_GPU_UTIL": "9223372036854775792",
    "DCGM_FI_DEV_FB_USED": "9223372036854775794",
    "DCGM_FI_DEV_GPU_TEMP": "9223372036854775792",
    "DCGM_FI_DEV_POWER_USAGE": "140737488355328",
}


def page(
    node: str, host_label: str, fields: list[str], values: dict[str, str] | None = None
) -> bytes:
    labels = LABELS.format(host=host_label, node=node)
    lines = []
    for name in fields:
        help_text, value = FIELDS[name]
        value = (values or {}).get(name, value)
        lines += [
            f"# HELP {name} {help_text}",
            f"# TYPE {name} gauge",
            f"{name}{{{labels}}} {value}",
        ]
    return ("\n".join(lines) + "\n").encode()


def serve(body: bytes) -> ThreadingHTTPServer:
    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    exporters = {
        "dcgm-node-a": serve(page("node-a", "Hostname", list(FIELDS))),
        "dcgm-node-b": serve(page("node-b", "hostname", list(FIELDS)[:3])),
        "dcgm-node-d": serve(page("node-d", "Hostname", list(FIELDS), BLANKS)),
    }
    jobs = {job: f"127.0.0.1:{s.server_address[1]}" for job, s in exporters.items()}
    prom = start_prometheus(tmp_path_factory.mktemp("prometheus"), jobs)
    try:
        until(
            lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 3,
            timeout=30,
            what="the three exporters' DCGM_FI_DEV_GPU_UTIL in Prometheus",
        )
        yield prom
    finally:
        stop(prom.proc)
        for server in exporters.values():
            server.shutdown()
            server.server_close()


# The shipped check, asking once: the poll window is for exporters still starting.
CHECK = load_catalog().checks.by_id["ai-service-metrics"]
ONCE = CHECK.model_copy(update={"parameters": {**CHECK.parameters, "window_s": 0}})


def check(url: str, nodes: list[str]):
    return asyncio.run(run_query_check(Target(url), ONCE, nodes))


def test_every_series_scraped_for_the_node_passes(prometheus):
    status, message, details = check(prometheus.url, ["node-a"])
    assert (status, message) == ("pass", "4 DCGM series scraped for all 1 nodes")
    assert details["series"] == (
        "DCGM_FI_DEV_GPU_UTIL,DCGM_FI_DEV_FB_USED,DCGM_FI_DEV_GPU_TEMP,DCGM_FI_DEV_POWER_USAGE"
    )


def test_a_series_missing_on_a_node_fails_naming_both(prometheus):
    status, message, details = check(prometheus.url, ["node-a", "node-b", "node-c"])
    assert status == "fail"
    assert message == (
        "no samples within 0 s: DCGM_FI_DEV_GPU_UTIL for node-c; DCGM_FI_DEV_FB_USED for "
        "node-c; DCGM_FI_DEV_GPU_TEMP for node-c; DCGM_FI_DEV_POWER_USAGE for node-b, node-c"
    )
    assert details["missing.DCGM_FI_DEV_POWER_USAGE"] == "node-b,node-c"


def test_an_unreachable_prometheus_is_an_error():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    status, message, _ = check(url, ["node-a"])
    assert status == "error"
    assert message.startswith(f"cannot query Prometheus at {url}: ConnectError")


def test_a_node_with_only_blank_values_fails_as_present_but_blank(prometheus):
    status, message, details = check(prometheus.url, ["node-a", "node-d"])
    assert status == "fail"
    assert message == (
        "only DCGM blank values (the field is unsupported on the GPU, or DCGM is not profiling):"
        " DCGM_FI_DEV_GPU_UTIL for node-d; DCGM_FI_DEV_FB_USED for node-d; DCGM_FI_DEV_GPU_TEMP"
        " for node-d; DCGM_FI_DEV_POWER_USAGE for node-d"
    )
    assert details["blank.DCGM_FI_DEV_POWER_USAGE"] == "node-d"
    assert not any(k.startswith("missing.") for k in details)


def test_blank_and_missing_nodes_are_told_apart(prometheus):
    status, message, details = check(prometheus.url, ["node-b", "node-d"])
    assert status == "fail"
    assert message == (
        "no samples within 0 s: DCGM_FI_DEV_POWER_USAGE for node-b; only DCGM blank values (the"
        " field is unsupported on the GPU, or DCGM is not profiling): DCGM_FI_DEV_GPU_UTIL for"
        " node-d; DCGM_FI_DEV_FB_USED for node-d; DCGM_FI_DEV_GPU_TEMP for node-d;"
        " DCGM_FI_DEV_POWER_USAGE for node-d"
    )
    assert (details["missing.DCGM_FI_DEV_POWER_USAGE"], details["blank.DCGM_FI_DEV_GPU_UTIL"]) == (
        "node-b",
        "node-d",
    )
