"""Ingest policy (issue 16, row 3): the cap on new node names; who may listen unauthenticated."""

from __future__ import annotations

import pytest

from plumb.aggregator.errors import InvalidInput, RateLimited
from plumb.aggregator.ingest.limits import NewNodeNames
from plumb.aggregator.ingest.port import check_exposure
from plumb.aggregator.settings import AggregatorSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_minutes_worth_is_admitted_at_once_then_refused_with_when_to_retry():
    clock = Clock()
    names = NewNodeNames(3, clock)
    for n in range(3):
        names.admit(f"node-{n}")
    with pytest.raises(RateLimited) as refused:
        names.admit("node-3")
    # 3 a minute is one every 20 s: the next token is 20 s away.
    assert refused.value.retry_after_s == 20
    assert "more than 3 new node names a minute" in str(refused.value)
    assert "PLUMB_INGEST__MAX_NEW_NODES_PER_MINUTE" in (refused.value.hint or "")


def test_tokens_come_back_at_the_rate_and_never_beyond_a_minutes_worth():
    clock = Clock()
    names = NewNodeNames(3, clock)
    for n in range(3):
        names.admit(f"node-{n}")
    clock.now += 20  # one token back
    names.admit("node-3")
    with pytest.raises(RateLimited):
        names.admit("node-4")
    clock.now += 3600  # an idle hour refills to 3, not 180
    for n in range(3):
        names.admit(f"later-{n}")
    with pytest.raises(RateLimited):
        names.admit("later-3")


def test_a_new_name_asking_again_within_the_minute_is_not_charged_again():
    # A cold start: node-0 is refused by the sync line and retries each second, as one name.
    clock = Clock()
    names = NewNodeNames(3, clock)
    names.admit("node-0")
    for _ in range(5):
        clock.now += 1
        names.admit("node-0")
    # 2 tokens after node-0, and a quarter back in the 5 s: node-1 and node-2 fit, node-3 not.
    names.admit("node-1")
    names.admit("node-2")
    with pytest.raises(RateLimited):
        names.admit("node-3")
    # A minute after its charge node-0 is charged again: of the bucket full again, it takes one
    # and node-3 and node-4 the other two (node-1 and node-2 are still within their minute).
    clock.now = 1000.0 + 60
    names.admit("node-0")
    names.admit("node-1")
    names.admit("node-3")
    names.admit("node-4")
    with pytest.raises(RateLimited):
        names.admit("node-5")


@pytest.mark.parametrize(
    "listen", ["127.0.0.1:7443", "127.1.2.3:7443", "[::1]:7443", "localhost:7443", "unix:/run/p"]
)
def test_unauthenticated_agents_on_loopback_need_no_flag(listen):
    check_exposure("none", listen, insecure_agents=False)


@pytest.mark.parametrize("listen", ["0.0.0.0:7443", "[::]:7443", "10.0.0.5:7443", "gpu-lab:7443"])
def test_unauthenticated_agents_beyond_loopback_need_the_flag(listen):
    with pytest.raises(InvalidInput) as refused:
        check_exposure("none", listen, insecure_agents=False)
    assert "--insecure-agents" in (refused.value.hint or "")
    check_exposure("none", listen, insecure_agents=True)
    check_exposure("token", listen, insecure_agents=False)
    check_exposure("kubernetes", listen, insecure_agents=False)


def test_by_default_agents_are_heard_on_loopback_only():
    settings = AggregatorSettings()
    assert (settings.grpc_listen, settings.auth.mode, settings.insecure_agents) == (
        "127.0.0.1:7443",
        "none",
        False,
    )
