"""The xid check's verdict, graded by the XID table (recipes/knowledge/xids.yaml): the node
lists the XIDs in its window, the table's severity decides pass, warn or fail."""

from __future__ import annotations

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.validation.model import CheckResult
from plumb.aggregator.validation.xids import grade_xids

XIDS = load_catalog().xids
CATALOG_REMEDIATION = "Look the XID up in NVIDIA's XID catalog and follow its recommended action."


def agent_result(status: str = "fail", **details: str) -> CheckResult:
    return CheckResult(
        node="n1",
        check_id="xid",
        phase="conformance",
        severity="critical",
        status=status,  # type: ignore[arg-type]
        message="as the agent said it",
        details={"window_s": "86400", **details},
        remediation=CATALOG_REMEDIATION,
    )


def test_a_gpu_off_the_bus_fails_with_its_meaning_and_action():
    graded = grade_xids(agent_result(**{"gpu3.xid79": "1"}), XIDS)
    assert graded.status == "fail"
    assert graded.message == (
        "XIDs in the last 24 h: GPU 3: XID 79 x1 (critical: GPU has fallen off the bus)"
    )
    assert graded.remediation.startswith("XID 79: drain the node and reboot it")


def test_application_xids_pass_named_and_a_warning_code_warns():
    app = grade_xids(agent_result(**{"gpu0.xid13": "4", "gpu1.xid43": "1"}), XIDS)
    assert app.status == "pass"
    assert "GPU 0: XID 13 x4 (info: Graphics Engine Exception" in app.message
    assert "GPU 1: XID 43 x1 (info: GPU stopped processing" in app.message
    warned = grade_xids(agent_result(**{"gpu0.xid13": "1", "gpu2.xid94": "1"}), XIDS)
    assert warned.status == "warn"
    assert warned.remediation.index("XID 13:") < warned.remediation.index("XID 94:")


def test_an_unknown_code_warns_naming_it_and_the_worst_code_wins():
    unknown = grade_xids(agent_result(**{"gpu0.xid999": "1"}), XIDS)
    assert unknown.status == "warn"
    assert "XID 999 x1 (unknown: not in the XID table)" in unknown.message
    assert unknown.remediation == f"XID 999: {CATALOG_REMEDIATION}"
    worst = grade_xids(agent_result(**{"gpu0.xid999": "1", "gpu5.xid48": "2"}), XIDS)
    assert worst.status == "fail"


def test_results_that_list_no_xid_are_kept_as_they_are():
    for result in (agent_result("pass"), agent_result("skip"), agent_result("error")):
        assert grade_xids(result, XIDS) is result
