"""Decoding and salvaging one file's bytes, without Spark."""

from __future__ import annotations

import gzip
import json

import pytest

from spark_jobs.cloudtrail import reasons
from spark_jobs.cloudtrail.decode import (
    ARRAY, DOCUMENT, LINES, RECORDS, Piece, decode_file, gunzip, salvage, shape_of)

A = {"eventID": "a", "eventTime": "2024-03-01T00:00:00Z"}
B = {"eventID": "b", "eventTime": "2024-03-01T00:00:01Z"}


def records_doc(*records) -> str:
    return json.dumps({"Records": list(records)})


@pytest.mark.parametrize("text, shape", [
    (records_doc(A), RECORDS),
    ('\n  {\n  "Records" : [ ]}', RECORDS),
    (json.dumps([A, B], indent=2), ARRAY),
    (json.dumps(A) + "\n" + json.dumps(B) + "\n", LINES),
    ('{"foo": []}', DOCUMENT),
    (json.dumps(A, indent=2), DOCUMENT),
    ("not json", DOCUMENT),
])
def test_shape_of(text, shape):
    assert shape_of(text) == shape


def test_gunzip_reads_every_member():
    data = gzip.compress(b'{"Records":[') + gzip.compress(b"]}")
    assert gunzip(data) == (b'{"Records":[]}', None)


def test_gunzip_reports_truncation_and_keeps_the_readable_prefix():
    text = records_doc(*[A] * 200).encode()
    cut = gzip.compress(text)[:-20]
    readable, damage = gunzip(cut)
    assert damage.startswith("truncated gzip stream")
    assert text.startswith(readable) and 0 < len(readable) < len(text)


def test_decode_detects_gzip_by_content_not_name():
    assert decode_file(gzip.compress(records_doc(A).encode())).text == records_doc(A)
    assert decode_file(records_doc(A).encode()).text == records_doc(A)


def test_decode_strips_bom_and_flags_invalid_utf8():
    assert decode_file(b"\xef\xbb\xbf" + records_doc(A).encode()).text == records_doc(A)
    decoded = decode_file(b'{"Records":[{"eventID":"\xff"}]}')
    assert decoded.bad_utf8 and "\ufffd" in decoded.text and decoded.reason is None


def test_decode_white_space_only_is_an_empty_file():
    assert decode_file(b" \n\t\n").reason == reasons.EMPTY_FILE


def test_salvage_keeps_records_before_a_syntax_error_and_quarantines_the_rest():
    text = '{"Records":[' + json.dumps(A) + "," + json.dumps(B) + " " + json.dumps(A) + "]}"
    pieces = salvage(text)
    assert pieces[:2] == [Piece(0, json.dumps(A)), Piece(1, json.dumps(B))]
    assert pieces[2].record_index is None and pieces[2].reason == reasons.INVALID_JSON
    assert pieces[2].raw == json.dumps(A) + "]}"
    assert pieces[2].detail.startswith("expected ',' or ']' at line 1 column")
    assert len(pieces) == 3


def test_salvage_of_a_truncated_stream_keeps_complete_records():
    text = '{"Records":[' + json.dumps(A) + "," + json.dumps(B)[:10]
    pieces = salvage(text, reasons.UNREADABLE_FILE, "truncated gzip stream: x")
    assert pieces[0] == Piece(0, json.dumps(A))
    assert pieces[1].reason == reasons.UNREADABLE_FILE and pieces[1].raw == json.dumps(B)[:10]
    assert pieces[1].detail.startswith("truncated gzip stream: x; ")


@pytest.mark.parametrize("text, detail", [
    ('{"foo": []}', "valid JSON dict without a 'Records' array of events (top-level keys: foo)"),
    ('{"Records": {"eventID": "a"}}', "'Records' is a JSON dict, not an array of events"),
    ('[{"eventID": ', None),
])
def test_salvage_file_level_problems(text, detail):
    [piece] = salvage(text)
    assert piece.record_index is None
    if detail:
        assert (piece.reason, piece.detail) == (reasons.NO_RECORDS, detail)
    else:
        assert piece.reason == reasons.INVALID_JSON


def test_salvage_json_lines_quarantines_only_the_bad_line():
    text = json.dumps(A) + "\n\n{broken\n" + json.dumps(B) + "\n"
    pieces = salvage(text)
    assert [(p.record_index, p.reason) for p in pieces] == [(0, None), (1, reasons.INVALID_JSON), (2, None)]


def test_salvage_a_single_pretty_printed_event():
    assert salvage(json.dumps(A, indent=2)) == [Piece(0, json.dumps(A, indent=2))]
