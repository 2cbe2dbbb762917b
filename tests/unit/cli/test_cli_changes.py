"""`plumb changes` over a hand-written GET /v1/changes answer: one line an event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conftest import FakeApi, run

POOL = "eks/h100/ubuntu/training/any"
ROLLOUT = {
    "summary": "nccl.libraries[*].version 2.27.7 → 2.28.3 on 12 of 16 nodes of " + POOL,
    "fact": "nccl.libraries[*].version",
    "old": "2.27.7",
    "new": "2.28.3",
    "pool": POOL,
    "nodes": [f"h100-{i}" for i in range(12)],
    "pool_nodes": 16,
    "started_at": "2026-07-01T02:10:00+00:00",
    "ended_at": "2026-07-01T02:14:00+00:00",
    "opened": [{"id": "f1"}, {"id": "f2"}],
    "closed": [],
    "validations": [
        {"id": "0123456789abcdef", "created_at": "2026-07-01T02:20:00+00:00",
         "finished_at": "2026-07-01T02:25:00+00:00", "result": "failed"}
    ],
}  # fmt: skip
GONE = {
    **ROLLOUT,
    "fact": "driver.driver_version",
    "old": "570.86.15",
    "new": "580.95.05",
    "pool": None,
    "nodes": ["old-1"],
    "pool_nodes": None,
    "started_at": "2026-06-29T23:05:00+00:00",
    "opened": [],
    "closed": [{"id": "f0"}],
    "validations": [],
}


def test_changes_print_one_line_an_event_newest_first(api: FakeApi) -> None:
    api.answers["/v1/changes"] = [ROLLOUT, GONE]
    assert run("changes", "--since", "3d", "--fact", "nccl").splitlines() == [
        "2 change events, newest first",
        "STARTED (UTC)      FACT                        OLD → NEW               NODES      "
        "POOL                           FINDINGS   VALIDATIONS",
        "02:10:00           nccl.libraries[*].version   2.27.7 → 2.28.3         12 of 16   "
        "eks/h100/ubuntu/training/any   2 opened   01234567 failed",
        "2026-06-29 23:05   driver.driver_version       570.86.15 → 580.95.05   1          "
        "-                              1 closed   -",
    ]
    ((path, params),) = api.calls
    assert path == "/v1/changes"
    assert params["fact"] == "nccl" and "until" not in params
    since = datetime.fromisoformat(params["since"])  # three days back from the real now
    assert abs(datetime.now(UTC) - timedelta(days=3) - since) < timedelta(minutes=1)
