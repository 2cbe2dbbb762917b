"""Exposition text kept per node: metric families whose samples come from many nodes.

A scrape of 1,000 8-GPU nodes is ~26 MB; formatting it per scrape took ~100 ms on the event
loop and held every stream's Ack back that long. Instead each node's lines are rendered
when the node changes (NodeSeries, SensorSeries) and kept here as bytes per family; a scrape
joins them in C, one family after another so each has one `# HELP` and `# TYPE`, and the
joined page is kept until a node's lines change again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter

__all__ = ["Families", "escape", "label_text"]


class Families:
    """Families (name, help, type) in the order rendered, with each node's lines per family."""

    def __init__(self, families: Sequence[tuple[str, str, str]]):
        self._headers = tuple(
            f"# HELP {name} {doc}\n# TYPE {name} {kind}\n".encode() for name, doc, kind in families
        )
        self._lines: dict[str, tuple[bytes, ...]] = {}
        self._order: list[str] | None = []  # the nodes by name; None once one comes or goes
        self._text: bytes | None = None  # the joined page; None once any node's lines change

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
        if node not in self._lines:
            self._order = None
        elif self._lines[node] == lines:
            return
        self._lines[node] = lines
        self._text = None

    def drop(self, node: str) -> None:
        """Remove node `node`'s lines, if it has any."""
        if self._lines.pop(node, None) is not None:
            self._order, self._text = None, None

    def render(self) -> bytes:
        """Every family: its header, then each node's lines, nodes by name."""
        if self._text is None:
            if self._order is None:
                self._order = sorted(self._lines)
            rows = list(map(self._lines.__getitem__, self._order))
            parts: list[bytes] = []
            for i, header in enumerate(self._headers):
                parts.append(header)
                parts.extend(map(itemgetter(i), rows))
            self._text = b"".join(parts)
        return self._text

    def pieces(self, per: int) -> Iterator[bytes]:
        """What `render` joins, as the nodes are now, in pieces of `per` nodes' lines of one
        family: for a page too big to join at once on the event loop (the sensor gauges)."""
        if self._order is None:
            self._order = sorted(self._lines)
        rows = list(map(self._lines.__getitem__, self._order))

        def pieces() -> Iterator[bytes]:
            for i, header in enumerate(self._headers):
                yield header
                column = itemgetter(i)
                for start in range(0, len(rows), per):
                    yield b"".join(map(column, rows[start : start + per]))

        return pieces()


def escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_text(labels: dict[str, str]) -> str:
    """Labels sorted by name, as prometheus_client writes them: `a="1",b="2"`."""
    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))
