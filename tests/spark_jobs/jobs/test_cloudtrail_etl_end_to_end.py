"""cloudtrail_etl end to end on generated samples: every record lands once, in the table or in quarantine."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pyspark.sql import functions as F

from spark_jobs.transforms.cloudtrail import reasons
from spark_jobs.transforms.cloudtrail.schema import KNOWN_TOP_LEVEL_KEYS
from spark_jobs.driver.job_modules import transform_batch
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import JOB, file_name, source_records


@pytest.fixture(scope="module")
def landed(tmp_path_factory, spark, run_job, tables):
    """The default sample landing, ingested once with small micro-batches."""
    root = tmp_path_factory.mktemp("e2e")
    manifest = write_sample_landing(root / "landing")
    summary = run_job(root / "landing", root / "lake", maxFilesPerTrigger="7")
    frames = tables(root / "lake")
    in_batch = transform_batch(spark, JOB, root / "landing")
    return {"root": root, "manifest": manifest, "summary": summary,
            "events": frames["cloudtrail_events"].collect(),
            "quarantine": frames["cloudtrail_quarantine"].collect(),
            "batch_events": in_batch["cloudtrail_events"].collect(),
            "batch_quarantine": in_batch["cloudtrail_quarantine"].collect()}


def _without_times(rows):
    return Counter(tuple(v for k, v in r.asDict().items() if k not in ("quarantined_at", "ingest_date")) for r in rows)


def test_batch_and_streaming_give_the_same_tables(landed):
    assert len(landed["events"]) == len(landed["batch_events"]) == 1255
    assert Counter(landed["events"]) == Counter(landed["batch_events"])
    assert _without_times(landed["quarantine"]) == _without_times(landed["batch_quarantine"])


def test_every_good_record_lands_exactly_once(landed):
    ids = [row.eventID for row in landed["events"]]
    assert len(ids) == len(landed["manifest"].good_event_ids) == 1255
    assert Counter(ids) == Counter(landed["manifest"].good_event_ids)


def test_quarantine_holds_exactly_the_bad_items_with_reasons(landed):
    got = sorted((file_name(r.source_file), r.record_index, r.reason) for r in landed["quarantine"])
    expected = sorted((b.path.name, b.record_index, b.reason) for b in landed["manifest"].bad)
    assert got == expected
    # every reason but a file deleted before it is read (tests/spark_jobs/object_store/test_notifications_on_s3.py)
    assert {r for _, _, r in got} == set(reasons.ALL) - {reasons.FILE_GONE}


def test_good_records_of_partly_bad_files_are_kept(landed):
    kept = Counter(file_name(r._source_file) for r in landed["events"])
    for item in landed["manifest"].bad:
        assert kept.get(item.path.name, 0) == item.good_records_in_file, item


def test_quarantine_rows_carry_raw_text_and_detail(landed):
    by_reason = {r.reason: r for r in landed["quarantine"]}
    bad_time = by_reason[reasons.BAD_EVENT_TIME]
    assert json.loads(bad_time.raw)["eventTime"] == "not-a-time"
    assert bad_time.detail == "eventTime is not an ISO-8601 timestamp: not-a-time"
    assert bad_time.eventID == json.loads(bad_time.raw)["eventID"]
    assert by_reason[reasons.UNREADABLE_FILE].detail.startswith("truncated gzip stream")
    assert by_reason[reasons.NOT_AN_OBJECT].raw == "42"
    assert "\ufffd" in by_reason[reasons.INVALID_UTF8].raw
    assert all(r.raw_length == len(r.raw) and not r.raw_truncated for r in landed["quarantine"])


def test_temp_and_dot_files_are_never_read(landed):
    read = {file_name(r._source_file) for r in landed["events"]} | {
        file_name(r.source_file) for r in landed["quarantine"]}
    assert read == {p.name for p in landed["manifest"].files_written}
    assert not read & {p.name for p in landed["manifest"].ignored_files}


def _healthy_source_records(manifest) -> dict:
    """eventID -> record, from every file with no bad item, read by the test's own JSON reader."""
    bad = {b.path.name for b in manifest.bad}
    return {record["eventID"]: record for path in manifest.files_written if path.name not in bad
            for record in source_records(path)}


def test_fields_are_typed_flattened_and_dated_in_utc(landed):
    sources = _healthy_source_records(landed["manifest"])
    rows = [r for r in landed["events"] if r.eventID in sources]
    assert len(rows) == 1255 - 9 - 8 - 9 - 9 - 10  # the partly bad files and the JSON-lines file are left out
    for row in rows:
        src = sources[row.eventID]
        assert row.eventTime.strftime("%Y-%m-%dT%H:%M:%SZ") == src["eventTime"]
        assert row.date.isoformat() == src["eventTime"][:10]
        assert row.readOnly == src.get("readOnly")
        assert row.userIdentity_type == src["userIdentity"]["type"]
        assert row.userIdentity_arn == src["userIdentity"].get("arn")
        issuer = src["userIdentity"].get("sessionContext", {}).get("sessionIssuer", {})
        assert row.userIdentity_sessionIssuer_userName == issuer.get("userName")
        assert row.tlsDetails_tlsVersion == src.get("tlsDetails", {}).get("tlsVersion")


def test_type_varying_fields_keep_their_raw_json(landed):
    sources = _healthy_source_records(landed["manifest"])
    varying = Counter()
    for row in landed["events"]:
        if row.eventID not in sources:
            continue
        src = sources[row.eventID]
        for field in ("requestParameters", "responseElements", "resources", "additionalEventData"):
            value = getattr(row, field)
            assert (None if value is None else json.loads(value)) == src.get(field), (row.eventID, field)
        max_results = (src.get("requestParameters") or {}).get("maxResults")
        if max_results is not None:
            varying[type(max_results).__name__] += 1
    assert varying["int"] > 0 and varying["str"] > 0  # the same field, both types, both kept


def test_unknown_top_level_fields_are_rescued_not_dropped(landed):
    expected = {}
    for event_id, record in _healthy_source_records(landed["manifest"]).items():
        unknown = {k: v for k, v in record.items() if k not in KNOWN_TOP_LEVEL_KEYS}
        if unknown:
            expected[event_id] = unknown
    got = {r.eventID: json.loads(r._rescued_data) for r in landed["events"] if r._rescued_data}
    assert len(expected) > 10
    assert {k: got[k] for k in expected} == expected  # the partly bad files may add more
    assert all(not set(fields) & set(KNOWN_TOP_LEVEL_KEYS) for fields in got.values())


def test_rerun_without_new_files_writes_nothing(landed, run_job, tables):
    summary = run_job(landed["root"] / "landing", landed["root"] / "lake")
    assert summary.batches == 0
    assert summary.rows == {"cloudtrail_events": 0, "cloudtrail_quarantine": 0}
    frames = tables(landed["root"] / "lake")
    assert frames["cloudtrail_events"].count() == 1255
    assert frames["cloudtrail_quarantine"].count() == len(landed["manifest"].bad)


def test_new_files_add_exactly_their_records(landed, run_job, tables):
    landing, lake = landed["root"] / "landing", landed["root"] / "lake"
    more = write_sample_landing(landing / "more", files=5, records_per_file=13, seed=99, include_bad_files=False)
    summary = run_job(landing, lake)
    assert summary.rows == {"cloudtrail_events": 65, "cloudtrail_quarantine": 0}
    events = tables(lake)["cloudtrail_events"]
    assert events.count() == 1255 + 65
    ids = {r.eventID for r in events.select("eventID").collect()}
    assert ids == set(landed["manifest"].good_event_ids) | set(more.good_event_ids)
    assert events.agg(F.count("*") - F.count_distinct("eventID")).first()[0] == 0


def _nested_file(path, event_ids, deep_id: str, depth: int) -> None:
    records = [json.dumps({"eventID": i, "eventTime": "2024-03-01T08:00:00Z", "eventName": "Plain"})
               for i in event_ids]
    records.append('{"eventID":"%s","eventTime":"2024-03-01T08:00:00Z","requestParameters":%s}'
                   % (deep_id, "[" * depth + "]" * depth))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"Records":[' + ",".join(records) + "]}")


def test_a_file_only_python_can_read_is_quarantined_whole_and_the_batch_stays_exact(tmp_path, run_job, tables):
    # 1,005 levels: simdjson (1,024) finds the file healthy, Spark's JSON reader (1,000) cannot read it.
    # The file is one quarantine row; the other file's events land.
    landing = tmp_path / "landing"
    _nested_file(landing / "deep_20240301T0800Z_a.json", ["d1", "d2"], "d3", 1005)
    _nested_file(landing / "fine_20240301T0800Z_b.json", ["f1", "f2"], "f3", 5)
    summary = run_job(landing, tmp_path / "lake")
    frames = tables(tmp_path / "lake")
    assert sorted(r.eventID for r in frames["cloudtrail_events"].collect()) == ["f1", "f2", "f3"]
    quarantined = [(file_name(r.source_file), r.record_index, r.reason, r.detail)
                   for r in frames["cloudtrail_quarantine"].collect()]
    assert quarantined == [("deep_20240301T0800Z_a.json", None, reasons.INVALID_JSON,
                            "Spark's JSON reader could not read this file as CloudTrail records")]
    assert summary.rows == {"cloudtrail_events": 3, "cloudtrail_quarantine": 1}


def test_a_record_nested_deeper_than_any_reader_goes_is_quarantined_not_fatal(tmp_path, run_job, tables):
    # 1,100 levels: neither simdjson nor Python's json reads it; the records before it are kept.
    landing = tmp_path / "landing"
    _nested_file(landing / "deeper_20240301T0800Z_c.json", ["e1", "e2"], "e3", 1100)
    run_job(landing, tmp_path / "lake")
    frames = tables(tmp_path / "lake")
    assert sorted(r.eventID for r in frames["cloudtrail_events"].collect()) == ["e1", "e2"]
    [row] = frames["cloudtrail_quarantine"].collect()
    assert (row.record_index, row.reason) == (None, reasons.INVALID_JSON)
    assert row.detail.startswith("nested more deeply than a JSON reader allows")
    assert row.raw.startswith('{"eventID":"e3"')
