"""cloudtrail_etl on the 30,481 real CloudTrail records in ../shared (1,239 files, 5 public sources)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.cloudtrail import reasons
from tests.spark_jobs.conftest import source_records

pytestmark = pytest.mark.real_data
INVALID_FILE = "zmallen_cloudtrail2sightings/cloudtrail.zip/aws.execution.ec2-user-data.json"


def _relative(uri: str, root: Path) -> str:
    return uri.split(str(root) + "/", 1)[1]


@pytest.fixture(scope="module")
def ingested(real_cloudtrail, tmp_path_factory, run_job, tables):
    lake = tmp_path_factory.mktemp("real") / "lake"
    summary = run_job(real_cloudtrail, lake)
    frames = tables(lake)
    manifest = {}
    with (real_cloudtrail.parent / "MANIFEST.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["path"].startswith("cloudtrail/"):
                records = row["records"]  # "None" for the invalid file
                manifest[row["path"].removeprefix("cloudtrail/")] = int(records) if records.isdigit() else 0
    events = frames["cloudtrail_events"].select(
        "_source_file", "_record_index", "eventID", "requestParameters", "responseElements", "_rescued_data").collect()
    return {"summary": summary, "manifest": manifest, "root": real_cloudtrail, "events": events,
            "quarantine": frames["cloudtrail_quarantine"].collect()}


def test_every_real_record_is_in_the_table_or_in_quarantine(ingested):
    manifest, root = ingested["manifest"], ingested["root"]
    assert len(manifest) == 1239 and sum(manifest.values()) == 30481
    per_file = Counter(_relative(r._source_file, root) for r in ingested["events"])
    quarantined = {_relative(r.source_file, root) for r in ingested["quarantine"]}
    assert set(per_file) | quarantined == set(manifest)  # every file accounted for
    for path, records in manifest.items():
        if path != INVALID_FILE:
            assert per_file[path] == records, path
    # The invalid file: its first record is complete before the syntax error and is kept.
    assert per_file[INVALID_FILE] == 1
    assert len(ingested["events"]) == 30481 + 1
    assert len({r.eventID for r in ingested["events"]}) == 28992 + 1  # real duplicate deliveries stay


def test_the_invalid_file_is_quarantined_with_a_reason(ingested):
    [row] = ingested["quarantine"]
    assert _relative(row.source_file, ingested["root"]) == INVALID_FILE
    assert (row.record_index, row.reason) == (None, reasons.INVALID_JSON)
    assert row.detail == "expected ',' or ']' at line 112 column 1 (char 3327)"
    text = (ingested["root"] / INVALID_FILE).read_text()
    assert row.raw == text[3327:] and row.raw_length == len(text) - 3327 and not row.raw_truncated


def test_type_varying_fields_round_trip_to_the_source_values(ingested):
    root = ingested["root"]
    rows = {(_relative(r._source_file, root), r._record_index): r for r in ingested["events"]}
    shapes = Counter()
    for path in ingested["manifest"]:
        if path == INVALID_FILE:
            continue
        for index, record in enumerate(source_records(root / path)):
            row = rows[(path, index)]
            assert row.eventID == record["eventID"]
            for field in ("requestParameters", "responseElements"):
                value = getattr(row, field)
                assert (None if value is None else json.loads(value)) == record.get(field), (path, index, field)
            start = (record.get("requestParameters") or {}).get("startTime")
            if start is not None:
                shapes[type(start).__name__] += 1
    assert shapes["int"] > 0 and shapes["str"] > 0  # requestParameters.startTime: epoch ms or text


def test_vendor_fields_at_the_top_level_are_rescued(ingested):
    rescued = [json.loads(r._rescued_data) for r in ingested["events"] if r._rescued_data]
    assert len(rescued) == 13  # the Datadog-forwarded records (12, plus 1 salvaged)
    assert all({"http", "evt", "service"} <= set(fields) for fields in rescued)
