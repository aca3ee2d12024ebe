"""The cloudtrail_etl transform on small hand-made files, in batch (the same code runs in streaming)."""

from __future__ import annotations

import gzip
import json

from spark_jobs.transforms.cloudtrail import reasons
from tests.helpers.cloudtrail import JOB, file_name
from tests.helpers.transformed import transformed_rows

TIME = "2024-03-01T12:00:00Z"



def test_a_field_of_the_wrong_shape_is_null_alone(spark, tmp_path):
    records = [
        {"eventID": "a", "eventTime": TIME, "userIdentity": "oops", "readOnly": "true", "tlsDetails": [1, 2]},
        {"eventID": "b", "eventTime": TIME, "userIdentity": {"type": "IAMUser", "sessionContext": "x"},
         "requestParameters": "plain text"},
    ]
    content = gzip.compress(json.dumps({"Records": records}).encode())
    got = transformed_rows(spark, JOB, tmp_path, {"x.json.gz": content})
    assert got["cloudtrail_quarantine"] == []
    rows = {r.eventID: r for r in got["cloudtrail_events"]}
    assert (rows["a"].userIdentity_type, rows["a"].readOnly, rows["a"].tlsDetails_tlsVersion) == (None, True, None)
    assert (rows["b"].userIdentity_type, rows["b"].userIdentity_sessionIssuer_arn) == ("IAMUser", None)
    assert rows["b"].requestParameters == "plain text" and rows["a"]._record_index == 0


def test_a_record_spark_rejects_keeps_its_raw_json_in_quarantine(spark, tmp_path):
    bad_time = {"eventID": "c", "eventTime": "2023-02-29T00:00:00Z", "vendor": [1]}
    content = json.dumps([{"eventID": "d", "eventTime": TIME}, bad_time]).encode()
    got = transformed_rows(spark, JOB, tmp_path, {"y.json": content})
    assert [r.eventID for r in got["cloudtrail_events"]] == ["d"]
    [row] = got["cloudtrail_quarantine"]
    assert (file_name(row.source_file), row.record_index, row.reason) == ("y.json", 1, reasons.BAD_EVENT_TIME)
    assert json.loads(row.raw) == bad_time and row.eventID == "c"


def test_an_empty_records_array_gives_no_rows(spark, tmp_path):
    got = transformed_rows(spark, JOB, tmp_path, {"z.json": b'{"Records": []}'})
    assert got == {"cloudtrail_events": [], "cloudtrail_quarantine": []}
