"""`plumb whatif` over hand-written POST /v1/whatif answers: the plan it sends, the tables it
prints (plain when piped), and its exit code: 1 only when a node would be blocked."""

from __future__ import annotations

import json

from conftest import FakeApi, run

POOL = "eks/h100/ubuntu/training/any"
EOL = {
    "rule": "driver-branch-eol",
    "verdict": "blocked",
    "severity": "critical",
    "reason": "driver branch R570 of 570.195.03 is past end of life (2026-02)",
    "source": "driver_branches.yaml row 570",
    "fix": "move to a supported production or long-term branch",
    "already": False,
}
NEW_FEATURE = {
    **EOL,
    "verdict": "safe",
    "severity": "info",
    "reason": "driver branch R590 is a new-feature branch with no long-term support",
    "fix": "prefer a production or long-term branch for clusters",
}


def answer(verdict: str, driver: str, *decisions: dict) -> dict:
    node = {
        "node": "h100-1",
        "verdict": verdict,
        "changes": [{"component": "driver", "current": "580.95.05", "planned": driver}],
        "decisions": list(decisions),
    }
    pool = {"pool": POOL, "verdict": verdict, "nodes": [node]}
    return {"plan": {"driver": driver}, "verdict": verdict, "pools": [pool]}


def test_a_blocked_plan_prints_pools_nodes_and_rules_and_exits_1(api: FakeApi) -> None:
    api.answers["/v1/whatif"] = answer("blocked", "570.195.03", EOL)
    lines = run("whatif", "--driver", "570.195.03", "--pool", POOL, code=1).splitlines()
    assert lines[:3] == [
        "what-if driver 570.195.03: blocked",
        "POOL                           VERDICT   NODES",
        f"{POOL}   blocked   1 blocked",
    ]
    assert lines[5:7] == [
        # the change cell is 29 wide, then the 3-space gap
        "NODE     POOL                           VERDICT   CHANGE" + " " * 26 + "DECIDED BY",
        f"h100-1   {POOL}   blocked   driver 580.95.05 → 570.195.03   driver-branch-eol",
    ]
    assert lines[8] == "rules that decided (already: holds on the live facts too)"
    assert lines[10].split()[:3] == ["blocked", "driver-branch-eol", "h100-1"]
    assert api.calls == [("/v1/whatif", {})]
    assert api.bodies == [{"components": {"driver": "570.195.03"}, "pools": [POOL]}]


def test_a_safe_plan_exits_0_and_json_is_the_api_answer(api: FakeApi) -> None:
    body = answer("safe", "590.44.01", NEW_FEATURE)
    api.answers["/v1/whatif"] = body
    assert json.loads(run("whatif", "--driver", "590.44.01", "-o", "json")) == body
    assert api.bodies == [{"components": {"driver": "590.44.01"}, "pools": []}]


def test_a_plan_to_review_does_not_fail_the_job(api: FakeApi) -> None:
    api.answers["/v1/whatif"] = answer("review", "630.10")
    assert run("whatif", "--driver", "630.10", "--cuda", "13.0", "--nccl", "2.28.3")
    (sent,) = api.bodies
    assert sent == {
        "components": {"driver": "630.10", "cuda": "13.0", "nccl": "2.28.3"},
        "pools": [],
    }
