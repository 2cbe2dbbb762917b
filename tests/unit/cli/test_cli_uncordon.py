"""`plumb uncordon NODE`: the call it makes and the line it prints."""

from __future__ import annotations

import pytest
from conftest import FakeApi, run

import plumb.aggregator.cli.uncordon as uncordon

ANSWER = {
    "node": "gpu-7",
    "uncordoned": True,
    "was_unschedulable": True,
    "findings": ["health gpu3/xid-79 (critical)"],
    "cordoned_at": "2026-07-01T02:00:00Z",
    "by": "alice",
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi()
    monkeypatch.setattr(uncordon, "api_json", api)
    monkeypatch.delenv("PLUMB_SERVER", raising=False)
    return api


def test_uncordon_posts_and_says_what_plumb_had_cordoned_the_node_for(fake: FakeApi) -> None:
    fake.answers["/v1/nodes/gpu-7/uncordon"] = ANSWER
    assert run("uncordon", "gpu-7") == (
        "uncordoned node gpu-7: Plumb cordoned it at 2026-07-01 02:00:00 UTC for "
        "health gpu3/xid-79 (critical)\n"
    )
    assert fake.calls == [("/v1/nodes/gpu-7/uncordon", {})]


def test_uncordon_says_when_the_node_was_already_schedulable(fake: FakeApi) -> None:
    fake.answers["/v1/nodes/gpu-7/uncordon"] = {**ANSWER, "was_unschedulable": False}
    assert "gpu-7 (it was already schedulable): Plumb" in run("uncordon", "gpu-7")
