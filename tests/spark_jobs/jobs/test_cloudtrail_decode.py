"""Decoding and salvaging one file's bytes, without Spark."""

from __future__ import annotations

import gzip
import json

import pytest

from spark_jobs.transforms.cloudtrail import reasons
from spark_jobs.transforms.cloudtrail.decode import (
    ARRAY, DOCUMENT, LINES, RECORDS, Piece, decode_file, gunzip, plain_event_time, salvage, shape_of, split_file)
from spark_jobs.transforms.cloudtrail.schema import KNOWN_TOP_LEVEL_KEYS

KNOWN = frozenset(KNOWN_TOP_LEVEL_KEYS)

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


def test_split_passes_a_healthy_delivery_to_the_jvm_as_its_text():
    content = gzip.compress(b"\xef\xbb\xbf" + records_doc(A, B).encode())
    split = split_file(content, KNOWN)
    assert (split.text, split.shape, split.rescued, split.raw, split.pieces) == (
        records_doc(A, B).encode(), RECORDS, {}, {}, None)
    assert split_file(json.dumps([A]).encode(), KNOWN).shape == ARRAY


def test_split_notes_unknown_top_level_fields_and_suspicious_records_by_position():
    extra = {**B, "vendor": {"n": 1.5, "tags": ["x"]}, "eventTime": "2024-02-30T00:00:00Z"}
    no_id = {**A, "eventID": " "}
    split = split_file(records_doc(A, extra, no_id).encode(), KNOWN)
    assert split.shape == RECORDS and split.pieces is None
    assert {i: json.loads(v) for i, v in split.rescued.items()} == {1: {"vendor": {"n": 1.5, "tags": ["x"]}}}
    assert {i: json.loads(v) for i, v in split.raw.items()} == {1: extra, 2: no_id}


@pytest.mark.parametrize("text, plain", [
    ("2024-03-01T12:34:56Z", True), ("2024-03-01T12:34:56.123456Z", True), ("2024-02-29T00:00:00Z", True),
    ("2023-02-29T00:00:00Z", False), ("2024-03-01 12:34:56", False), ("2024-13-01T00:00:00Z", False),
    ("not-a-time", False), (1700000000, False), (None, False),
])
def test_plain_event_time(text, plain):
    assert plain_event_time(text) is plain


def test_split_salvages_what_spark_cannot_take_whole():
    not_object = split_file(('{"Records":[' + json.dumps(A) + ', 42]}').encode(), KNOWN)
    assert not_object.text is None
    assert [(p["record_index"], p["reason"], p["raw"]) for p in not_object.pieces] == [
        (0, None, json.dumps(A)), (1, reasons.NOT_AN_OBJECT, "42")]
    assert not_object.pieces[1]["detail"] == "a record must be a JSON object, got: 42"
    bad_utf8 = split_file(('{"Records":[' + json.dumps(A) + ',').encode() + b'{"eventID":"\xff"}]}', KNOWN)
    assert [(p["record_index"], p["reason"]) for p in bad_utf8.pieces] == [(0, None), (1, reasons.INVALID_UTF8)]
    lines = split_file((json.dumps({**A, "x": 1}) + "\n" + json.dumps(B) + "\n").encode(), KNOWN)
    assert [(p["record_index"], p["reason"], p["rescued"]) for p in lines.pieces] == [(0, None, '{"x":1}'),
                                                                                      (1, None, None)]
    truncated = split_file(gzip.compress(records_doc(A, B).encode())[:-30], KNOWN)
    assert truncated.pieces[-1]["reason"] == reasons.UNREADABLE_FILE
    assert [p["reason"] for p in split_file(b" \n", KNOWN).pieces] == [reasons.EMPTY_FILE]
