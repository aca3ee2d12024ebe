"""What every JSON-lines log type's parser shares (spark_jobs.transforms.json_lines), in plain Python: the time
forms read, objects kept as JSON text and typed inside, what is not typed rescued, and a declaration that would
take a platform column refused."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.transforms.json_lines import INT, JSON, LONG, STRING, TIMESTAMP, JsonLinesLog, parse_time, sha256_of

UTC = dt.timezone.utc


def test_times_need_a_zone_and_compact_offsets_only_where_declared():
    assert parse_time("2023-02-28T11:34:02.133169+0200") is None
    assert parse_time("2023-02-28T11:34:02.133169+0200", compact_offsets=True) == dt.datetime(
        2023, 2, 28, 9, 34, 2, 133169, tzinfo=UTC)
    assert parse_time("2023-02-28T11:34:02.1331699-01:30") == dt.datetime(2023, 2, 28, 13, 4, 2, 133169, tzinfo=UTC)
    assert [parse_time(text, compact_offsets=True) for text in
            ("2023-02-28T11:34:02", "2023-02-30T00:00:00Z", "2023-02-28 11:34:02Z", 1677584042, None)] == [None] * 5


def _key(row: dict, record: dict, moment: dt.datetime) -> str:
    return sha256_of([row["kind"], record.get("obj"), moment.isoformat()])


LOG = JsonLinesLog(kind="kind", fields={"kind": STRING, "n": LONG, "obj": JSON, "at": TIMESTAMP},
                   nested={"obj_x": ("obj.x", INT), "obj_at": ("obj.at", TIMESTAMP)}, event_key=_key,
                   compact_offsets=True)


def test_objects_are_json_text_typed_inside_and_what_does_not_fit_is_rescued():
    row = LOG.parse_line('{"kind": "k", "timestamp": "2023-02-28T11:34:02+0000", "n": "7", "obj": {"x": 3, '
                         '"at": "2023-02-28T11:00:00+0100", "y": [1]}, "at": "2023-02-28T10:00:00Z", "other": null}')
    moment = dt.datetime(2023, 2, 28, 11, 34, 2, tzinfo=UTC)
    assert row == {"kind": "k", "n": None, "obj": '{"x":3,"at":"2023-02-28T11:00:00+0100","y":[1]}',
                   "at": dt.datetime(2023, 2, 28, 10, 0, tzinfo=UTC), "obj_x": 3,
                   "obj_at": dt.datetime(2023, 2, 28, 10, 0, tzinfo=UTC), "timestamp": moment, "date": moment.date(),
                   "event_id": _key({"kind": "k"}, {"obj": {"x": 3, "at": "2023-02-28T11:00:00+0100", "y": [1]}},
                                    moment),
                   "_rescued_data": '{"n":"7","other":null}'}
    scalar = LOG.parse_line('{"kind": "k", "timestamp": "2023-02-28T11:34:02Z", "obj": 5}')
    assert (scalar["obj"], scalar["obj_x"], scalar["_rescued_data"]) == (None, None, '{"obj":5}')


def test_a_line_without_its_kind_is_quarantined_under_the_kinds_name():
    assert LOG.reasons[-3:] == ("missing_kind", "missing_timestamp", "bad_timestamp")
    assert LOG.parse_line('{"kind": 1, "timestamp": "2023-02-28T11:34:02Z"}') == {
        "reason": "missing_kind", "detail": "kind is not a non-blank string: 1", "kind": None}


@pytest.mark.parametrize("fields, nested, column", [
    ({"kind": STRING, "raw": STRING}, {}, "raw"),
    ({"kind": STRING, "date": STRING}, {}, "date"),
    ({"kind": STRING, "obj": JSON}, {"obj": ("obj.x", INT)}, "obj"),
])
def test_a_field_that_would_take_a_platform_column_is_refused(fields, nested, column):
    with pytest.raises(ValueError) as caught:
        JsonLinesLog(kind="kind", fields=fields, nested=nested, event_key=_key)
    assert str(caught.value) == (f"the column {column!r} of the log type is the platform's or declared twice; name "
                                 "the field's column otherwise (a nested column), or drop it")
