"""Deflated page pieces make one gzip stream: any gzip reader gets back the texts joined, and
the trailer's CRC-32, combined from the pieces', is the one of the whole text."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest
from httpx._decoders import GZipDecoder

from plumb.aggregator.metrics.packed import crc32_combine, gzip_stream, pack

# CRC-32 check value of the gzip CRC (the "123456789" test vector of the CRC catalogues).
CHECK = 0xCBF43926

TEXTS = [
    b"# HELP a A.\n# TYPE a gauge\n",
    b'a{node="n1"} 1.0\na{node="n2"} 1.0\n' * 50,
    b"",
    b'a{node="n3"} 5.0\n',
]


def test_a_crc_combined_from_two_halves_is_the_whole_one_s():
    assert zlib.crc32(b"123456789") == CHECK
    assert crc32_combine(zlib.crc32(b"1234"), zlib.crc32(b"56789"), 5) == CHECK
    assert crc32_combine(CHECK, zlib.crc32(b""), 0) == CHECK
    assert crc32_combine(0, CHECK, 9) == CHECK  # nothing before: the CRC of the empty text is 0


@pytest.mark.parametrize("seed", range(5))
def test_combining_matches_zlib_for_pieces_of_any_length(seed):
    rng = random.Random(seed)
    for _ in range(200):
        a, b = rng.randbytes(rng.randrange(300)), rng.randbytes(rng.randrange(70_000))
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_the_stream_decodes_to_the_texts_joined_with_every_gzip_reader():
    body = b"".join(gzip_stream(pack(t) for t in TEXTS))
    whole = b"".join(TEXTS)

    assert gzip.decompress(body) == whole
    one_member = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert one_member.decompress(body) == whole and one_member.eof
    assert one_member.unused_data == b"", "one gzip member, so a reader of one reads it all"
    decoder = GZipDecoder()  # httpx's
    assert decoder.decode(body) + decoder.flush() == whole


def test_an_empty_page_is_a_valid_empty_stream():
    assert gzip.decompress(b"".join(gzip_stream([pack(b"")]))) == b""


def test_a_piece_is_the_same_wherever_it_goes():
    piece = pack(TEXTS[1])
    first = b"".join(gzip_stream([piece, pack(TEXTS[3])]))
    later = b"".join(gzip_stream([pack(TEXTS[0]), pack(TEXTS[3]), piece]))
    assert gzip.decompress(first) == TEXTS[1] + TEXTS[3]
    assert gzip.decompress(later) == TEXTS[0] + TEXTS[3] + TEXTS[1]
    assert len(piece.data) < len(TEXTS[1]) / 10, "repeated lines deflate well"


def test_a_corrupted_piece_fails_the_readers_check():
    piece = pack(TEXTS[1])
    wrong = piece._replace(crc=piece.crc ^ 1)
    with pytest.raises(gzip.BadGzipFile, match="CRC check failed"):
        gzip.decompress(b"".join(gzip_stream([wrong])))
