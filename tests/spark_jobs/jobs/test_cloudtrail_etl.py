"""The cloudtrail_etl transform on small hand-made files, in batch (the same code runs in streaming)."""

from __future__ import annotations

import gzip
import json

from spark_jobs.transforms.cloudtrail import reasons
from spark_jobs.driver.job_modules import transform_batch
from tests.helpers.cloudtrail import JOB, file_name

TIME = "2024-03-01T12:00:00Z"


def _ingest(spark, tmp_path, files: dict[str, bytes]) -> dict:
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    tables = transform_batch(spark, JOB, tmp_path)
    return {name: frame.collect() for name, frame in tables.items()}


def test_a_field_of_the_wrong_shape_is_null_alone(spark, tmp_path):
    records = [
        {"eventID": "a", "eventTime": TIME, "userIdentity": "oops", "readOnly": "true", "tlsDetails": [1, 2]},
        {"eventID": "b", "eventTime": TIME, "userIdentity": {"type": "IAMUser", "sessionContext": "x"},
         "requestParameters": "plain text"},
    ]
    got = _ingest(spark, tmp_path, {"x.json.gz": gzip.compress(json.dumps({"Records": records}).encode())})
    assert got["cloudtrail_quarantine"] == []
    rows = {r.eventID: r for r in got["cloudtrail_events"]}
    assert (rows["a"].userIdentity_type, rows["a"].readOnly, rows["a"].tlsDetails_tlsVersion) == (None, True, None)
    assert (rows["b"].userIdentity_type, rows["b"].userIdentity_sessionIssuer_arn) == ("IAMUser", None)
    assert rows["b"].requestParameters == "plain text" and rows["a"]._record_index == 0


def test_a_record_spark_rejects_keeps_its_raw_json_in_quarantine(spark, tmp_path):
    bad_time = {"eventID": "c", "eventTime": "2023-02-29T00:00:00Z", "vendor": [1]}
    got = _ingest(spark, tmp_path, {"y.json": json.dumps([{"eventID": "d", "eventTime": TIME}, bad_time]).encode()})
    assert [r.eventID for r in got["cloudtrail_events"]] == ["d"]
    [row] = got["cloudtrail_quarantine"]
    assert (file_name(row.source_file), row.record_index, row.reason) == ("y.json", 1, reasons.BAD_EVENT_TIME)
    assert json.loads(row.raw) == bad_time and row.eventID == "c"


def test_an_empty_records_array_gives_no_rows(spark, tmp_path):
    got = _ingest(spark, tmp_path, {"z.json": b'{"Records": []}'})
    assert got == {"cloudtrail_events": [], "cloudtrail_quarantine": []}
