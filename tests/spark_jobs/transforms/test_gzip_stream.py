"""spark_jobs.transforms.gzip_stream: gzip found by content, and what a damaged stream still gives."""

from __future__ import annotations

import gzip

from spark_jobs.transforms.gzip_stream import decompress, gunzip


def test_plain_bytes_pass_through_and_a_bom_is_dropped_either_way():
    assert decompress(b"\xef\xbb\xbfa\nb\n") == (b"a\nb\n", None)
    assert decompress(gzip.compress(b"\xef\xbb\xbfa\n")) == (b"a\n", None)
    assert decompress(b"\x1fa") == (b"\x1fa", None)  # one magic byte is not gzip


def test_every_member_is_read_and_zero_padding_between_them_is_skipped():
    assert gunzip(gzip.compress(b"a\n") + b"\x00\x00" + gzip.compress(b"b\n")) == (b"a\nb\n", None)


def test_damage_keeps_what_came_before_it_and_says_what_it_is():
    whole = gzip.compress(b"a\n" * 100)
    assert gunzip(whole + b"junk") == (b"a\n" * 100, "4 bytes of garbage after the gzip stream")
    readable, damage = gunzip(whole[:-8])
    assert (readable, damage) == (b"a\n" * 100, f"truncated gzip stream: {len(whole) - 8} compressed bytes end "
                                                "before the stream does (200 bytes readable)")
    readable, damage = gunzip(whole[:10] + b"\xff" * 20)
    assert readable == b"" and damage.startswith("corrupt gzip stream: Error -3 while decompressing data")
