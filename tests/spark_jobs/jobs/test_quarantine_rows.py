"""The one shape of every job's quarantine rows (spark_jobs.transforms.quarantine), on a static DataFrame,
routed as the driver routes a transform's result (the registry's ``reason IS NULL`` / ``reason IS NOT NULL``)."""

from __future__ import annotations

import datetime as dt

from spark_jobs.transforms.quarantine import event_columns, quarantine_columns


def test_quarantined_rows_keep_where_why_the_cut_raw_text_and_when(spark):
    parsed = spark.createDataFrame(
        [("f1", 0, None, None, None, "e0"), ("f1", 1, "invalid_json", "at column 3", "abcdef", None),
         ("f2", None, "unreadable_file", "truncated", None, "e2")],
        "_file string, _pos int, reason string, detail string, raw string, id string")
    routed = parsed.where("reason IS NOT NULL")
    rows = quarantine_columns(routed, source_file="_file", position=("_pos", "line_number"), identity="id",
                              max_raw_chars=4).collect()
    today = dt.datetime.now(dt.timezone.utc).date()
    assert [r.asDict() | {"quarantined_at": None} for r in rows] == [
        {"source_file": "f1", "line_number": 1, "reason": "invalid_json", "detail": "at column 3", "raw": "abcd",
         "raw_truncated": True, "raw_length": 6, "id": None, "quarantined_at": None, "ingest_date": today},
        {"source_file": "f2", "line_number": None, "reason": "unreadable_file", "detail": "truncated", "raw": "",
         "raw_truncated": False, "raw_length": 0, "id": "e2", "quarantined_at": None, "ingest_date": today},
    ]
    assert all(r.quarantined_at.date() == today for r in rows)


def test_events_are_the_rows_without_a_reason_and_without_the_verdicts_columns(spark):
    parsed = spark.createDataFrame([("e0", None, None, None), ("e1", "invalid_json", "d", "{")],
                                   "id string, reason string, detail string, raw string")
    assert [r.asDict() for r in event_columns(parsed.where("reason IS NULL")).collect()] == [{"id": "e0"}]
