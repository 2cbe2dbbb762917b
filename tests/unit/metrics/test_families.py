"""Families: per-node lines joined (and deflated) a slice of nodes at a time, and again only
where a node's lines changed."""

from __future__ import annotations

import asyncio
import gzip
import zlib

from plumb.aggregator.metrics import packed as packed_module
from plumb.aggregator.metrics import text as text_module
from plumb.aggregator.metrics.packed import gzip_stream
from plumb.aggregator.metrics.text import Families

HEADERS = [b"# HELP a A.\n# TYPE a gauge\n", b"# HELP b B.\n# TYPE b gauge\n"]


def lines(name: str, value: str = "1.0") -> tuple[bytes, bytes]:
    return (f'a{{node="{name}"}} {value}\n'.encode(), f'b{{node="{name}"}} 2.0\n'.encode())


def families(*names: str) -> Families:
    out = Families([("a", "A.", "gauge"), ("b", "B.", "gauge")], per=2)
    for name in names:
        out.set(name, lines(name))
    return out


def test_each_family_has_one_header_then_the_nodes_by_name_in_slices():
    assert list(families("n3", "n1", "n2").pieces()) == [
        HEADERS[0],
        b'a{node="n1"} 1.0\na{node="n2"} 1.0\n',
        b'a{node="n3"} 1.0\n',
        HEADERS[1],
        b'b{node="n1"} 2.0\nb{node="n2"} 2.0\n',
        b'b{node="n3"} 2.0\n',
    ]


def test_a_change_joins_only_its_own_slice_again():
    page = families("n1", "n2", "n3", "n4")
    before = list(page.pieces())
    page.set("n3", lines("n3", "5.0"))
    after = list(page.pieces())
    assert after[2] == b'a{node="n3"} 5.0\na{node="n4"} 1.0\n'
    assert after[1] is before[1] and after[4] is before[4], "n1 and n2's slice was kept"
    page.set("n3", lines("n3", "5.0"))  # the same lines: nothing to join
    assert all(x is y for x, y in zip(page.pieces(), after, strict=True))


def test_nodes_that_come_and_go_move_the_slices():
    page = families("n1", "n3")
    list(page.pieces())
    page.set("n2", lines("n2"))
    page.drop("n1")
    page.drop("absent")
    assert b"".join(page.pieces()) == b"".join(
        [HEADERS[0], lines("n2")[0], lines("n3")[0], HEADERS[1], lines("n2")[1], lines("n3")[1]]
    )
    assert list(families().pieces()) == HEADERS


def test_a_page_being_sent_skips_a_node_gone_meanwhile_and_keeps_no_stale_join():
    page = families("n1", "n2", "n3")
    sending = page.pieces()
    assert next(sending) == HEADERS[0]
    page.drop("n2")  # between two pieces of a scrape
    assert next(sending) == b'a{node="n1"} 1.0\n'
    rest = list(sending)
    assert rest == [b'a{node="n3"} 1.0\n', HEADERS[1], b'b{node="n1"} 2.0\n', b'b{node="n3"} 2.0\n']
    assert list(page.pieces()) == [
        HEADERS[0],
        b'a{node="n1"} 1.0\na{node="n3"} 1.0\n',
        HEADERS[1],
        b'b{node="n1"} 2.0\nb{node="n3"} 2.0\n',
    ]


def test_a_page_being_sent_joins_each_slice_once_as_it_was_when_its_first_family_went_out():
    page = families("n1", "n2", "n3")
    sending = page.pieces()
    assert next(sending) == HEADERS[0]
    assert next(sending) == b'a{node="n1"} 1.0\na{node="n2"} 1.0\n'
    # n1 reports after its slice's first family went out, changing both families' lines.
    page.set("n1", (b'a{node="n1"} 5.0\n', b'b{node="n1"} 6.0\n'))
    assert list(sending) == [
        b'a{node="n3"} 1.0\n',
        HEADERS[1],
        b'b{node="n1"} 2.0\nb{node="n2"} 2.0\n',
        b'b{node="n3"} 2.0\n',
    ]
    assert b"".join(page.pieces()) == (
        HEADERS[0]
        + b'a{node="n1"} 5.0\na{node="n2"} 1.0\na{node="n3"} 1.0\n'
        + HEADERS[1]
        + b'b{node="n1"} 6.0\nb{node="n2"} 2.0\nb{node="n3"} 2.0\n'
    )


def unpacked(pieces) -> list[bytes]:
    """Each deflated piece's text, read back with a raw inflater."""
    return [zlib.decompressobj(-zlib.MAX_WBITS).decompress(p.data) for p in pieces]


async def test_packed_pieces_are_the_pieces_deflated():
    page = families("n3", "n1", "n2")
    packed = await page.packed()
    assert unpacked(packed) == list(page.pieces())
    assert gzip.decompress(b"".join(gzip_stream(packed))) == b"".join(page.pieces())


async def test_a_change_deflates_only_its_own_slice_again():
    page = families("n1", "n2", "n3", "n4")
    before = await page.packed()
    page.set("n3", lines("n3", "5.0"))
    after = await page.packed()
    assert unpacked([after[2]]) == [b'a{node="n3"} 5.0\na{node="n4"} 1.0\n']
    assert after[1] is before[1] and after[4] is before[4], "n1 and n2's slice was kept"
    assert all(x is y for x, y in zip(await page.packed(), after, strict=True))


async def test_a_change_while_deflating_is_sent_as_asked_for_and_not_kept(monkeypatch):
    page = families("n1", "n2")
    real = asyncio.to_thread

    async def change_meanwhile(fn, *args):
        page.set("n1", lines("n1", "7.0"))  # a report lands while the worker deflates
        return await real(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", change_meanwhile)
    monkeypatch.setattr(text_module, "INLINE", 0)  # every deflate on the worker thread
    sent = await page.packed()
    monkeypatch.setattr(asyncio, "to_thread", real)
    assert unpacked([sent[1]]) == [b'a{node="n1"} 1.0\na{node="n2"} 1.0\n']
    assert unpacked(await page.packed())[1] == b'a{node="n1"} 7.0\na{node="n2"} 1.0\n'


async def test_a_family_whose_lines_did_not_move_keeps_its_piece(monkeypatch):
    page = families("n1", "n2", "n3")
    before = await page.packed()
    page.set("n2", (lines("n2", "5.0")[0], lines("n2")[1]))  # a's line moves, b's does not
    deflated: list[bytes] = []
    real = packed_module.pack
    monkeypatch.setattr(text_module, "pack", lambda t: deflated.append(t) or real(t))
    after = await page.packed()
    assert deflated == [b'a{node="n1"} 1.0\na{node="n2"} 5.0\n']
    assert after[4] is before[4], "family b of n1 and n2 was not deflated again"


async def test_a_node_that_comes_keeps_the_pieces_of_the_slices_it_leaves_alone(monkeypatch):
    page = families("n1", "n2", "n3")
    before = await page.packed()
    page.set("n4", lines("n4"))  # the slices are cut again; n1 and n2's is the same
    after = await page.packed()
    assert after[1] is before[1] and after[4] is before[4]
    assert unpacked([after[2], after[5]]) == [
        b'a{node="n3"} 1.0\na{node="n4"} 1.0\n',
        b'b{node="n3"} 2.0\nb{node="n4"} 2.0\n',
    ]


async def test_a_few_lines_are_deflated_on_the_loop_and_more_on_a_worker_thread(monkeypatch):
    threads: list[object] = []
    real = asyncio.to_thread

    async def counted(fn, *args):
        threads.append(fn)
        return await real(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    page = families("n1", "n2", "n3")
    await page.packed()  # 4 pieces of ~20 bytes: well under INLINE
    assert threads == []
    monkeypatch.setattr(text_module, "INLINE", 20)
    page.set("n1", lines("n1", "3.0"))  # 34 bytes of a's lines to deflate again
    assert unpacked(await page.packed())[1] == b'a{node="n1"} 3.0\na{node="n2"} 1.0\n'
    assert len(threads) == 1
