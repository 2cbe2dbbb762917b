"""The agent's reconnect delay: uniform over a window that starts at reconnect_window_s,
doubles per failed attempt in a row and stops at backoff_max_s."""

from __future__ import annotations

import random
import statistics

import grpc
import pytest

from plumb.agent.settings import StreamSettings
from plumb.agent.stream import _retry_after_s, pushback_delay, reconnect_delay, status_lost

S = StreamSettings(reconnect_window_s=10.0, backoff_max_s=30.0)


def _fleet(settings: StreamSettings, failures: int, n: int = 10_000) -> list[float]:
    """The delays `n` agents draw after `failures` failed attempts."""
    rng = random.Random(9)
    return [reconnect_delay(settings, failures, rng) for _ in range(n)]


@pytest.mark.parametrize(("failures", "window"), [(0, 10.0), (1, 20.0), (2, 30.0), (9, 30.0)])
def test_window_doubles_per_failed_attempt_up_to_the_cap(failures, window):
    delays = _fleet(S, failures)
    assert 0 <= min(delays) < window * 0.01
    assert window * 0.99 < max(delays) <= window


def test_very_many_failures_stay_at_the_cap():
    assert max(_fleet(S, 10**6, n=1000)) <= 30.0


def test_a_cap_below_the_window_wins():
    assert max(_fleet(StreamSettings(reconnect_window_s=10.0, backoff_max_s=3.0), 0)) <= 3.0


@pytest.mark.parametrize("failures", [0, 1])
def test_a_fleet_is_spread_evenly_over_the_window(failures):
    """No lockstep: 10,000 agents' delays cover the window uniformly."""
    delays = _fleet(S, failures)
    window = max(delays)
    assert abs(statistics.mean(delays) - window / 2) < window * 0.02
    counts = [0] * 10
    for d in delays:
        counts[min(int(d / window * 10), 9)] += 1
    assert max(counts) < 1_200, counts  # no tenth of the window holds over 12 %


@pytest.mark.parametrize("field", ["reconnect_window_s", "backoff_max_s", "probe_max_s"])
def test_non_positive_settings_are_refused(field):
    with pytest.raises(ValueError, match=field):
        StreamSettings(**{field: 0})


def test_a_pushback_waits_at_least_the_hint_plus_at_most_a_second_and_a_quarter_of_it():
    rng = random.Random(3)
    delays = [pushback_delay(4.0, rng) for _ in range(10_000)]
    # 4 s, plus up to 1 s + 4/4 s.
    assert 4.0 <= min(delays) < 4.0 + 0.02
    assert 6.0 - 0.02 < max(delays) <= 6.0


def _refusal(code: grpc.StatusCode, *trailing: tuple[str, str]) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details="refused"
    )


@pytest.mark.parametrize("code", [grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE])
def test_a_busy_or_starting_aggregator_s_hint_is_taken(code):
    assert _retry_after_s(_refusal(code, ("plumb-retry-after-s", "2"))) == 2.0


def test_no_hint_or_another_code_means_the_own_backoff():
    assert _retry_after_s(_refusal(grpc.StatusCode.UNAVAILABLE)) is None
    refused = _refusal(grpc.StatusCode.PERMISSION_DENIED, ("plumb-retry-after-s", "2"))
    assert _retry_after_s(refused) is None


def test_an_internal_from_a_write_to_an_ended_stream_is_named_as_a_lost_status():
    # What grpcio 1.85's asyncio client raised from Hello writes to streams that 2,000
    # concurrent clients had refused RESOURCE_EXHAUSTED (1 in 10 of them).
    core = 'Failed "execute_batch": (<grpc._cython.cygrpc.SendMessageOperation object at 0x7f1>,)'
    lost = grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        details="Internal error from Core",
        debug_error_string=core,
    )
    assert status_lost(lost)
    assert _retry_after_s(lost) is None  # the hint went with the status: the own backoff
    assert not status_lost(_refusal(grpc.StatusCode.INTERNAL))  # an INTERNAL the server sent
    assert not status_lost(_refusal(grpc.StatusCode.RESOURCE_EXHAUSTED))
