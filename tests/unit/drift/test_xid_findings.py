"""Health findings from the XIDs a node's GPUs report, graded by recipes/knowledge/xids.yaml.

Expected severities and meanings are NVIDIA's, as the XID table cites them (79: GPU has fallen
off the bus, critical; 13: Graphics Engine Exception, usually the application, info; 94: a
contained ECC error, warning); a code the table lacks is named as unknown, a warning.
"""

from __future__ import annotations

import pytest
from test_engine import CATALOG, Clock, evaluate, h100_facts

from plumb.aggregator.drift import DriftEngine
from plumb.facts import Reading


@pytest.fixture
def engine() -> DriftEngine:
    return DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)


def with_xids(**gpus: list[int]) -> dict[str, Reading]:
    """The H100 node with `gpuI=[codes]`: each GPU's XID facts, one of each code."""
    extra: dict[str, object] = {}
    for name, codes in gpus.items():
        i = name.removeprefix("gpu")
        extra[f"gpus[{i}].xid_count"] = len(codes)
        for j, code in enumerate(sorted(codes)):
            extra[f"gpus[{i}].xids[{j}].code"] = code
            extra[f"gpus[{i}].xids[{j}].count"] = 1
            extra[f"gpus[{i}].xids[{j}].last_seen_unix_s"] = 1_796_000_000
    return h100_facts(**extra)


def xid_findings(engine: DriftEngine) -> dict[str, tuple[str, str, str]]:
    return {
        f.component: (f.severity, f.expected, f.observed)
        for f in engine.open_findings()
        if "/xid-" in f.component
    }


def test_a_gpu_off_the_bus_opens_a_critical_finding_with_the_tables_action(engine):
    evaluate(engine, with_xids(gpu0=[], gpu1=[]))
    opened = evaluate(engine, with_xids(gpu1=[79])).opened
    (finding,) = opened
    assert (finding.kind, finding.component) == ("health", "gpu1/xid-79")
    assert finding.severity == "critical"
    assert (finding.expected, finding.observed) == ("no XID", "XID 79: GPU has fallen off the bus")
    assert finding.remediation.startswith("drain the node and reboot it (a cold reset)")
    assert "https://docs.nvidia.com/deploy/xid-errors/index.html" in finding.remediation


def test_each_code_takes_the_tables_severity_and_an_unknown_one_warns(engine):
    evaluate(engine, with_xids(gpu0=[13, 94], gpu1=[999]))
    assert xid_findings(engine) == {
        "gpu0/xid-13": (
            "info",
            "no XID",
            "XID 13: Graphics Engine Exception (usually an out-of-range access or bad instruction"
            " in the application)",
        ),
        "gpu0/xid-94": (
            "warning",
            "no XID",
            "XID 94: Contained ECC error (an uncorrectable error confined to the applications"
            " using that memory)",
        ),
        "gpu1/xid-999": ("warning", "no XID", "XID 999: not in the XID table"),
    }
    unknown = next(f for f in engine.open_findings() if f.component == "gpu1/xid-999")
    assert "NVIDIA's XID catalog" in unknown.remediation


def test_a_repeated_xid_keeps_its_finding_and_a_reboot_closes_it(engine):
    evaluate(engine, with_xids(gpu1=[79]))
    (first,) = engine.open_findings()
    again = with_xids(gpu1=[79]) | {
        "gpus[1].xid_count": Reading.ok(3),
        "gpus[1].xids[0].count": Reading.ok(3),
    }
    assert not evaluate(engine, again)  # the same finding, not a new transition
    closed = evaluate(engine, with_xids(gpu1=[])).closed  # the new boot reports none
    assert [f.id for f in closed] == [first.id]
    assert engine.open_findings() == []


def test_a_pool_mates_change_leaves_xid_findings_open(engine):
    facts = with_xids(gpu0=[48])
    evaluate(engine, facts)
    result = engine.evaluate_pool("n1", facts, "hash", {})
    assert not result.closed
    assert xid_findings(engine) == {
        "gpu0/xid-48": (
            "critical",
            "no XID",
            "XID 48: Double Bit ECC Error (uncorrectable memory error)",
        )
    }
