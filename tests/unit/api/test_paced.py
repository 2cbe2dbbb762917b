"""Large pages leave in slices, and the event loop runs between them, so a client that reads
as fast as the aggregator writes cannot hold every agent stream behind one page."""

from __future__ import annotations

import asyncio

from plumb.aggregator.api.paced import SLICE, sliced


async def test_pieces_leave_in_slices_of_at_most_slice_bytes_in_order():
    pieces = [b"a" * (SLICE + 10), b"", b"b" * 3]

    sent = [bytes(s) async for s in sliced(pieces)]

    assert [len(s) for s in sent] == [SLICE, 10, 3]
    assert b"".join(sent) == b"".join(pieces)


async def test_other_callbacks_run_between_slices_though_nothing_pauses_the_sender():
    # A consumer that never suspends stands for a transport that never pauses (a fast
    # reader): only the body itself can let the loop run.
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "ack")

    seen_before = [list(ran) async for _ in sliced([b"x" * (2 * SLICE)])]

    assert seen_before == [[], ["ack"]]


async def test_a_piece_is_taken_only_once_the_one_before_is_sent():
    taken: list[int] = []

    def pieces():
        for i in range(3):
            taken.append(i)
            yield b"p"

    seen = [list(taken) async for _ in sliced(pieces())]

    assert seen == [[0], [0, 1], [0, 1, 2]]
