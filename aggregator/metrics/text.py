"""Exposition text kept per node: metric families whose samples come from many nodes.

A scrape of 1,000 8-GPU nodes is ~26 MB; formatting it per scrape took ~100 ms on the event
loop and held every stream's Ack back that long. Instead each node's lines are rendered
when the node changes (NodeSeries, SensorSeries) and kept here as bytes per family. The
nodes, by name, are cut in slices of a few hundred; each slice's lines of each family are
joined once and kept until one of its nodes' lines change, so a scrape after one node
changed joins one slice again, not the fleet (bench/README.md, issue 21).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter

__all__ = ["NODES_PER_PIECE", "Families", "escape", "label_text"]

# Nodes per slice: a piece of a few hundred KB, joined in a fraction of a millisecond.
NODES_PER_PIECE = 500


class Families:
    """Families (name, help, type) in the order rendered, with each node's lines per family,
    joined `per` nodes at a time."""

    def __init__(self, families: Sequence[tuple[str, str, str]], per: int):
        self._headers = tuple(
            f"# HELP {name} {doc}\n# TYPE {name} {kind}\n".encode() for name, doc, kind in families
        )
        self._columns = range(len(self._headers))
        self._per = per
        self._lines: dict[str, tuple[bytes, ...]] = {}
        # The nodes by name, cut in slices of `per`; None once one comes or goes.
        self._slices: list[list[str]] | None = None
        self._slice_of: dict[str, int] = {}
        # Per slice, its lines joined per family; None until joined, and once a node's change.
        self._joined: list[tuple[bytes, ...] | None] = []

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
        """Every family: its header, then each slice's lines of it, nodes by name; a slice is
        joined (and kept) when first needed, so a caller may send the pieces as they come."""
        if self._slices is None:
            order = sorted(self._lines)
            self._slices = [order[i : i + self._per] for i in range(0, len(order), self._per)]
            self._slice_of = {n: i for i, names in enumerate(self._slices) for n in names}
            self._joined = [None] * len(self._slices)
        return self._pieces(self._slices, self._joined)

    def _pieces(
        self, slices: list[list[str]], joined: list[tuple[bytes, ...] | None]
    ) -> Iterator[bytes]:
        # A node may come, go or change while the caller sends: each slice is joined from
        # the lines as they are then, and kept only while the slices are still these.
        for i, header in enumerate(self._headers):
            yield header
            for k, names in enumerate(slices):
                held = joined[k]
                if held is None:
                    rows = [r for r in map(self._lines.get, names) if r is not None]
                    held = tuple(b"".join(map(itemgetter(f), rows)) for f in self._columns)
                    if joined is self._joined:
                        joined[k] = held
                yield held[i]


def escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_text(labels: dict[str, str]) -> str:
    """Labels sorted by name, as prometheus_client writes them: `a="1",b="2"`."""
    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))
