"""Page pieces kept deflated, joined into one gzip stream at scrape.

Prometheus asks for `Accept-Encoding: gzip` on every scrape. Compressing a 16 MB /metrics
page of 10,000 nodes on each scrape would cost more than sending it; instead each piece the
page is joined from (a family's header, a slice of nodes' lines of it) is deflated once, when
it is first asked for after it changed, with its own compressor ended by a sync flush: its
bytes are whole, byte-aligned deflate blocks that refer to nothing before them, so any
sequence of such pieces, between a gzip header and a final empty block, is one valid
deflate stream. The gzip trailer's CRC-32 of the whole text is combined from each piece's
own (zlib's crc32_combine, which Python's zlib module does not expose), so a scrape reads
no text and compresses none but what changed.

One stream, not one gzip member per piece: RFC 1952 allows members in a row, but some
clients (httpx among them) read only the first and drop the rest without a word.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

__all__ = ["Packed", "crc32_combine", "gzip_stream", "pack"]

# zlib's fastest level: the node families of 10,000 nodes deflate in 40 % of level 6's CPU,
# to 15 % more bytes (bench/metrics_gzip.py).
LEVEL = 1

# The gzip member's header (RFC 1952): deflate, no flags, no time, no extra flags, OS unknown.
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

# The last deflate block: final, fixed Huffman codes, nothing in it but its end code.
LAST_BLOCK = b"\x03\x00"


class Packed(NamedTuple):
    """A piece of text as deflate blocks (byte-aligned, none final), with the text's CRC-32
    and length."""

    data: bytes
    crc: int
    size: int


def pack(text: bytes) -> Packed:
    """`text` deflated on its own, ready to go anywhere in a stream of packed pieces."""
    deflate = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    data = deflate.compress(text) + deflate.flush(zlib.Z_SYNC_FLUSH)
    return Packed(data, zlib.crc32(text), len(text))


def gzip_stream(pieces: Iterable[Packed]) -> list[bytes]:
    """The gzip encoding of the pieces' texts in order, as bytes to send in order."""
    out = [HEADER]
    crc = size = 0
    for piece in pieces:
        if piece.size:
            out.append(piece.data)
            crc = crc32_combine(crc, piece.crc, piece.size)
            size += piece.size
    out.append(LAST_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF))
    return out


# CRC-32 (the gzip one: reflected, polynomial 0x04C11DB7) of A + B from those of A and B and
# B's length, as zlib's crc32_combine: CRC(A) times x^(8 * len(B)) modulo the polynomial,
# plus CRC(B).
_POLY = 0xEDB88320


def _multiply(a: int, b: int) -> int:
    """a * b modulo the polynomial, both reflected; `a` not 0."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _powers() -> tuple[int, ...]:
    """x^(2^k) modulo the polynomial for k in 0..31 (x^1 is 1 << 30, reflected)."""
    out = [1 << 30]
    for _ in range(31):
        out.append(_multiply(out[-1], out[-1]))
    return tuple(out)


_X2N = _powers()


@lru_cache(maxsize=4096)
def _shift(length: int) -> int:
    """x^(8 * length) modulo the polynomial (reflected): moves a CRC past `length` bytes."""
    p = 1 << 31  # x^0
    k = 3  # 8 = 2^3
    while length:
        if length & 1:
            p = _multiply(_X2N[k & 31], p)
        length >>= 1
        k += 1
    return p


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc1 of A, crc2 of B and B's length."""
    return _multiply(_shift(length2), crc1) ^ crc2
