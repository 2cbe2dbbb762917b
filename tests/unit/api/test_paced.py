"""Large pages leave in slices, and the event loop runs between them, so a client that reads
as fast as the aggregator writes cannot hold every agent stream behind one page; gzip goes to
the scrapes whose Accept-Encoding takes it."""

from __future__ import annotations

import asyncio

import pytest

from plumb.aggregator.api.paced import SLICE, accepts_gzip, sliced


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


@pytest.mark.parametrize(
    ("header", "takes"),
    [
        ("gzip", True),  # Prometheus's scrape
        ("gzip, deflate, br", True),
        ("GZip;Q=0.5", True),  # names and parameters are case-insensitive
        ("x-gzip", True),
        ("*", True),
        ("deflate, *;q=0.1", True),
        ("gzip;q=0", False),  # RFC 9110 12.5.3: q=0 is "not acceptable"
        ("gzip;q=0.000, *", False),  # named beats `*`
        ("identity", False),
        ("deflate, br", False),
        ("", False),
        (None, False),
        ("gzip;q=x", False),  # a weight that is no number counts as 0
    ],
)
def test_gzip_is_taken_where_accept_encoding_weighs_it_above_zero(header, takes):
    assert accepts_gzip(header) is takes
