"""XIDs end to end: an XID 79 injected into a simulated node's profile reaches the aggregator
as facts, opens a critical health finding, and fails the xid check, while a clean node of the
same kind passes it."""

from __future__ import annotations

from conftest import until
from test_validation import by_key, connected, finished, start


def test_an_injected_xid_79_opens_a_critical_finding_and_fails_the_xid_check(
    aggregator, start_agent
):
    start_agent(aggregator, "clean", "dgx-h100")
    sick = start_agent(aggregator, "off-the-bus", "dgx-h100")
    connected(aggregator, "clean", "off-the-bus")
    # Injected while the node runs: the profile is re-read, and an XID already due comes at once.
    sick.edit(lambda spec: spec.update(xids=[{"gpu": 3, "code": 79, "after_s": 0}]))

    finding = until(
        lambda: next(
            f
            for f in aggregator.json("/v1/drift", node="off-the-bus")
            if f["component"] == "gpu3/xid-79"
        ),
        what="the XID 79 finding",
    )
    assert (finding["kind"], finding["severity"]) == ("health", "critical")
    assert finding["observed"] == "XID 79: GPU has fallen off the bus"
    assert "drain the node and reboot it" in finding["remediation"]
    gpus = aggregator.json("/v1/nodes/off-the-bus")["facts"]["gpus"]
    assert gpus[3]["xid_count"]["value"] == 1
    assert gpus[3]["xids"][0]["code"]["value"] == 79
    assert gpus[0]["xid_count"]["value"] == 0
    assert not [f for f in aggregator.json("/v1/drift", node="clean") if "xid" in f["component"]]

    results = by_key(finished(aggregator, start(aggregator, checks=["xid"])))
    sick_xid, clean_xid = results[("off-the-bus", "xid")], results[("clean", "xid")]
    assert sick_xid["status"] == "fail"
    assert "GPU 3: XID 79 x1 (critical: GPU has fallen off the bus)" in sick_xid["message"]
    assert sick_xid["remediation"].startswith("XID 79: drain the node")
    assert clean_xid["status"] == "pass"
    assert clean_xid["message"] == "no XID on 8 GPUs in the last 24 h"
