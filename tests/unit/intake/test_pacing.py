"""The bulk work's pacer: one piece at a time, the loop free after each for its share."""

from __future__ import annotations

import asyncio

import pytest

from plumb.aggregator.pacing import Pacer


class Taking:
    """A clock under which every piece takes `seconds`: it is read at a piece's start, then
    at its end."""

    def __init__(self, seconds: float):
        self._seconds = seconds
        self._reads = 0

    def __call__(self) -> float:
        self._reads += 1
        return self._reads // 2 * self._seconds


async def test_while_streams_arrive_pieces_run_one_at_a_time_with_the_loop_free_between():
    pacer = Pacer(0.5, clock=Taking(0.05))  # each piece is followed by 0.05 s free
    pacer.arrived()
    loop = asyncio.get_running_loop()
    steps = 0
    events: list[tuple[str, float, int]] = []

    async def ticker() -> None:
        nonlocal steps
        while True:
            steps += 1
            await asyncio.sleep(0)

    async def piece() -> None:
        async with pacer.turn():
            events.append(("start", loop.time(), steps))
            await asyncio.sleep(0)  # a chance to overlap, were turns not one at a time
            events.append(("end", loop.time(), steps))

    tick = asyncio.create_task(ticker())
    await asyncio.wait_for(asyncio.gather(piece(), piece(), piece()), 30)
    tick.cancel()
    assert [kind for kind, _, _ in events] == ["start", "end"] * 3
    for (_, ended, steps_then), (_, started, steps_later) in zip(
        events[1::2], events[2::2], strict=False
    ):
        assert started - ended >= 0.05 - 0.001
        assert steps_later > steps_then


async def _three_pieces(pacer: Pacer) -> list[int]:
    done: list[int] = []

    async def piece(i: int) -> None:
        async with pacer.turn():
            done.append(i)

    await asyncio.wait_for(asyncio.gather(*(piece(i) for i in range(3))), 30)
    return done


async def test_at_full_duty_pieces_follow_each_other_without_rest():
    pacer = Pacer(1.0, clock=Taking(3600))  # any rest would be an hour
    pacer.arrived()
    assert sorted(await _three_pieces(pacer)) == [0, 1, 2]


async def test_with_no_stream_arriving_pieces_follow_each_other_without_rest():
    pacer = Pacer(0.25, clock=Taking(3600))  # any rest would be three hours
    assert sorted(await _three_pieces(pacer)) == [0, 1, 2]


async def test_with_no_stream_arriving_the_loop_still_runs_between_pieces():
    # Turns taken one after another in one task: without a step of the loop between them
    # they would hold the loop, and no stream would be taken, until the last was done.
    pacer = Pacer(0.25, clock=Taking(0.0))
    steps = 0
    ticking = asyncio.Event()

    async def ticker() -> None:
        nonlocal steps
        while True:
            steps += 1
            ticking.set()
            await asyncio.sleep(0)  # one step of the loop: what the test counts, not a wait

    tick = asyncio.create_task(ticker())
    await ticking.wait()
    seen = []
    for _ in range(5):
        async with pacer.turn():
            seen.append(steps)
    tick.cancel()
    assert all(later > earlier for earlier, later in zip(seen, seen[1:], strict=False))


async def test_a_piece_that_fails_gives_its_turn_to_the_next():
    pacer = Pacer(0.5, clock=Taking(0.0))

    async def failing() -> None:
        async with pacer.turn():
            raise ValueError("malformed facts")

    async def fine() -> str:
        async with pacer.turn():
            return "synced"

    failed, synced = await asyncio.wait_for(
        asyncio.gather(failing(), fine(), return_exceptions=True), 30
    )
    assert isinstance(failed, ValueError) and synced == "synced"


@pytest.mark.parametrize("duty", [0.0, -0.5, 1.5])
def test_a_duty_outside_zero_to_one_is_refused(duty):
    with pytest.raises(ValueError, match="duty must be in"):
        Pacer(duty)
