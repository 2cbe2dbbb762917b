"""Exposition text kept per node: metric families whose samples come from many nodes.

A scrape of 1,000 8-GPU nodes is ~26 MB; formatting it per scrape took ~100 ms on the event
loop and held every stream's Ack back that long. Instead each node's lines are rendered
when the node changes (NodeSeries, SensorSeries) and kept here as bytes per family. The
nodes, by name, are cut in slices of a few hundred; each slice's lines of each family are
joined once and kept until one of its nodes' lines change, so a scrape after one node
changed joins one slice again, not the fleet (bench/README.md, issue 21). For a scrape that
takes gzip, each slice's joined lines are also kept deflated (metrics/packed.py), until they
change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from operator import is_, itemgetter

from plumb.aggregator.metrics.packed import Packed, pack

__all__ = ["NODES_PER_PIECE", "Families", "escape", "label_text"]

# Nodes per slice: a piece of a few hundred KB, joined in a fraction of a millisecond.
NODES_PER_PIECE = 500

# Lines deflated on the event loop itself at most (bytes, ~1 ms): more go to a worker thread,
# whose answer waits for a turn of the loop, behind whatever else is ready then.
INLINE = 1 << 18


class Families:
    """Families (name, help, type) in the order rendered, with each node's lines per family,
    joined `per` nodes at a time."""

    def __init__(self, families: Sequence[tuple[str, str, str]], per: int):
        self._headers = tuple(
            f"# HELP {name} {doc}\n# TYPE {name} {kind}\n".encode() for name, doc, kind in families
        )
        self._packed_headers = tuple(map(pack, self._headers))
        self._columns = range(len(self._headers))
        self._per = per
        self._lines: dict[str, tuple[bytes, ...]] = {}
        # The nodes by name, cut in slices of `per`; None once one comes or goes.
        self._slices: list[list[str]] | None = None
        self._slice_of: dict[str, int] = {}
        # Per slice, its lines joined per family; None until joined, and once a node's change.
        self._joined: list[tuple[bytes, ...] | None] = []
        # Per slice, the joined lines it was last deflated from and their pieces: current
        # while those are `_joined`'s; a family whose lines are the same again keeps its piece.
        self._packed: list[tuple[tuple[bytes, ...], tuple[Packed, ...]] | None] = []

    def __len__(self) -> int:
        return len(self._lines)

    def __contains__(self, node: str) -> bool:
        return node in self._lines

    def get(self, node: str) -> tuple[bytes, ...] | None:
        """Node `node`'s lines, one bytes per family; None when it has none."""
        return self._lines.get(node)

    def set(self, node: str, lines: tuple[bytes, ...]) -> None:
        """Make `lines` (one bytes per family, b"" for none) node `node`'s lines."""
        assert len(lines) == len(self._headers)
        held = self._lines.get(node)
        if held is None:
            self._slices = None
        elif held == lines:
            return
        elif self._slices is not None:
            self._joined[self._slice_of[node]] = None
        self._lines[node] = lines

    def drop(self, node: str) -> None:
        """Remove node `node`'s lines, if it has any."""
        if self._lines.pop(node, None) is not None:
            self._slices = None

    def pieces(self) -> Iterator[bytes]:
        """Every family: its header, then each slice's lines of it, nodes by name; each piece
        is joined when it is needed, so a caller may send the pieces as they come."""
        return self._pieces(self._cut(), self._joined)

    async def packed(self) -> list[Packed]:
        """The pieces of `pieces`, deflated. The slices changed since they were last deflated
        are deflated again, only the families whose lines moved, as they were when asked for,
        and kept while their lines stay so: on the loop up to INLINE bytes, else on a worker
        thread (zlib lets go of the GIL)."""
        slices = self._cut()
        held = list(self._packed)
        stale = [k for k, p in enumerate(held) if p is None or p[0] is not self._joined[k]]
        if stale:
            texts = [self._join(slices, self._joined, k) for k in stale]
            todo = [_unchanged(t, held[k]) for k, t in zip(stale, texts, strict=True)]
            if sum(len(x) for row in todo for x in row if type(x) is bytes) <= INLINE:
                fresh = _pack_rest(todo)
            else:
                fresh = await asyncio.to_thread(_pack_rest, todo)
            for k, text, packed in zip(stale, texts, fresh, strict=True):
                held[k] = (text, packed)
                if self._slices is slices and self._joined[k] is text:
                    self._packed[k] = held[k]
        out: list[Packed] = []
        for i, header in enumerate(self._packed_headers):
            out.append(header)
            out.extend(p[1][i] for p in held if p is not None)
        return out

    def _cut(self) -> list[list[str]]:
        """The nodes by name in slices of `per`, cut again once a node came or went (each
        slice's last deflated pieces kept, for the families whose lines it holds again)."""
        if self._slices is None:
            order = sorted(self._lines)
            self._slices = [order[i : i + self._per] for i in range(0, len(order), self._per)]
            self._slice_of = {n: i for i, names in enumerate(self._slices) for n in names}
            self._joined = [None] * len(self._slices)
            n = len(self._slices)
            self._packed = (self._packed + [None] * n)[:n]
        return self._slices

    def _join(
        self, slices: list[list[str]], joined: list[tuple[bytes, ...] | None], k: int
    ) -> tuple[bytes, ...]:
        """Slice `k`'s lines joined per family, from the lines as they are now; kept only
        while the slices are still these."""
        held = joined[k]
        if held is None:
            rows = [r for r in map(self._lines.get, slices[k]) if r is not None]
            held = tuple(b"".join(map(itemgetter(f), rows)) for f in self._columns)
            if joined is self._joined:
                joined[k] = held
        return held

    def _pieces(
        self, slices: list[list[str]], joined: list[tuple[bytes, ...] | None]
    ) -> Iterator[bytes]:
        # A node may come, go or change while the caller sends. Each slice's lines are read
        # when its first family goes out, and each family's piece is joined from them as it
        # goes out. Joining the whole slice for its first piece held the event loop 3-5 ms
        # per slice of a 10,000-node sensor page; joining it again for each family after a
        # report cost 7x the page's CPU (bench/sensor_scrape.py). A slice whose nodes held
        # still until the page's end keeps its join for the next.
        n = len(slices)
        whole = list(joined)  # each slice's join, where one is kept
        seen: list[list[tuple[bytes, ...] | None] | None] = [None] * n  # lines as first read
        rows: list[list[tuple[bytes, ...]]] = [[] for _ in range(n)]
        texts: list[list[bytes]] = [[] for _ in range(n)]
        for i, header in enumerate(self._headers):
            yield header
            for k in range(n):
                kept = whole[k]
                if kept is not None:
                    yield kept[i]
                    continue
                if seen[k] is None:
                    lines = seen[k] = list(map(self._lines.get, slices[k]))
                    rows[k] = [r for r in lines if r is not None]
                text = b"".join(map(itemgetter(i), rows[k]))
                texts[k].append(text)
                yield text
        if joined is self._joined:
            for k, lines in enumerate(seen):
                if lines is not None and joined[k] is None:
                    if all(map(is_, map(self._lines.get, slices[k]), lines)):
                        joined[k] = tuple(texts[k])


def _unchanged(
    texts: tuple[bytes, ...], before: tuple[tuple[bytes, ...], tuple[Packed, ...]] | None
) -> list[bytes | Packed]:
    """A slice's families: the piece deflated before where its lines are what it was
    deflated from (comparing bytes costs a small part of deflating them), else the lines."""
    if before is None:
        return list(texts)
    return [old if text == was else text for text, was, old in zip(texts, *before, strict=True)]


def _pack_rest(todo: list[list[bytes | Packed]]) -> list[tuple[Packed, ...]]:
    """Each slice's pieces, the lines still to deflate deflated."""
    return [tuple(x if isinstance(x, Packed) else pack(x) for x in row) for row in todo]


def escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_text(labels: dict[str, str]) -> str:
    """Labels sorted by name, as prometheus_client writes them: `a="1",b="2"`."""
    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))
