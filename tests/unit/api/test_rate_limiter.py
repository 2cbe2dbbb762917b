"""The token bucket per caller: a burst, then the sustained rate, each key on its own, and a
bounded number of keys. The clock is a number the test advances, so no test sleeps."""

from __future__ import annotations

import pytest

from plumb.aggregator.api.limits import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_then_a_full_bucket_again():
    clock = Clock()
    limiter = RateLimiter(rate_per_s=2.0, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)  # one request refills in 1/rate s
    clock.now += 0.5
    assert limiter.take("a") == 0.0
    assert limiter.take("a") > 0
    clock.now += 60
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]  # capped at the burst
    assert limiter.take("a") > 0


def test_a_refused_request_costs_nothing():
    clock = Clock()
    limiter = RateLimiter(rate_per_s=1.0, burst=1, clock=clock)
    assert limiter.take("a") == 0.0
    for _ in range(10):
        assert limiter.take("a") == pytest.approx(1.0)
    clock.now += 1.0
    assert limiter.take("a") == 0.0


def test_each_key_has_its_own_bucket():
    limiter = RateLimiter(rate_per_s=1.0, burst=1, clock=Clock())
    assert limiter.take("token:ci") == 0.0
    assert limiter.take("token:ci") > 0
    assert limiter.take("address:10.0.0.7") == 0.0


def test_the_least_recently_used_bucket_goes_first_when_keys_run_over():
    limiter = RateLimiter(rate_per_s=1.0, burst=1, max_keys=2, clock=Clock())
    limiter.take("a")
    limiter.take("b")
    limiter.take("a")  # refused, and now the most recent
    limiter.take("c")  # evicts b
    assert limiter.take("a") > 0  # a was kept, still empty
    assert limiter.take("b") == 0.0  # b came back full
