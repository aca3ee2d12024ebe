"""cloudtrail_etl on the 30,481 real CloudTrail records in ../shared (1,239 files, 5 public sources).

They hold 28,992 distinct eventIDs (CloudTrail delivered some events more than once): the table holds
each once, the first delivery (in one batch: the lowest file and record position).
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from spark_jobs.transforms.cloudtrail import reasons
from tests.helpers.cloudtrail import source_records

pytestmark = pytest.mark.real_data
INVALID_FILE = "zmallen_cloudtrail2sightings/cloudtrail.zip/aws.execution.ec2-user-data.json"


def _relative(uri: str, root: Path) -> str:
    return uri.split(str(root) + "/", 1)[1]


@pytest.fixture(scope="module")
def ingested(real_cloudtrail, tmp_path_factory, run_job, tables):
    root = tmp_path_factory.mktemp("real")
    landing, lake = root / "landing", root / "lake"
    shutil.copytree(real_cloudtrail, landing)  # 15 MB; files are delivered into it again below
    summary = run_job(landing, lake, maxFilesPerTrigger="2000")  # one batch: first delivery = lowest position
    frames = tables(lake)
    manifest = {}
    with (real_cloudtrail.parent / "MANIFEST.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["path"].startswith("cloudtrail/"):
                records = row["records"]  # "None" for the invalid file
                manifest[row["path"].removeprefix("cloudtrail/")] = int(records) if records.isdigit() else 0
    events = frames["cloudtrail_events"].select(
        "_source_file", "_record_index", "eventID", "requestParameters", "responseElements", "_rescued_data").collect()
    return {"summary": summary, "manifest": manifest, "root": landing, "lake": lake, "events": events,
            "quarantine": frames["cloudtrail_quarantine"].collect()}


def _deliveries(ingested) -> dict:
    """eventID -> [(file, record index)] of every healthy source record, read by Python's json."""
    found = defaultdict(list)
    for path in ingested["manifest"]:
        if path != INVALID_FILE:
            for index, record in enumerate(source_records(ingested["root"] / path)):
                found[record["eventID"]].append((path, index))
    return found


def test_every_real_record_is_in_the_table_once_or_in_quarantine(ingested):
    manifest, root = ingested["manifest"], ingested["root"]
    assert len(manifest) == 1239 and sum(manifest.values()) == 30481
    deliveries = _deliveries(ingested)
    assert sum(map(len, deliveries.values())) == 30481 and len(deliveries) == 28992
    events = ingested["events"]
    # One row per eventID: 28,992, plus the salvaged first record of the invalid file.
    assert len(events) == len({r.eventID for r in events}) == 28992 + 1
    kept = {r.eventID: (_relative(r._source_file, root), r._record_index) for r in events}
    assert set(kept) - set(deliveries) == {r.eventID for r in events if _relative(r._source_file, root) == INVALID_FILE}
    for event_id, places in deliveries.items():
        assert kept[event_id] == min(places), event_id  # the first delivery is the one kept
    assert sum(len(p) > 1 for p in deliveries.values()) > 0  # the samples do hold duplicate deliveries
    assert {_relative(r.source_file, root) for r in ingested["quarantine"]} == {INVALID_FILE}
    assert ingested["summary"].rows == {"cloudtrail_events": 28992 + 1, "cloudtrail_quarantine": 1}


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
            row = rows.get((path, index))
            if row is None:  # a later delivery of an event kept from an earlier one
                continue
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


def test_files_delivered_again_under_new_names_add_nothing(ingested, run_job, tables):
    root, lake = ingested["root"], ingested["lake"]
    healthy = sorted(p for p, n in ingested["manifest"].items() if n and p != INVALID_FILE)[:5]
    (root / "redelivered").mkdir()
    for i, path in enumerate(healthy):
        shutil.copyfile(root / path, root / "redelivered" / f"again-{i}-{Path(path).name}")
    summary = run_job(root, lake)
    assert summary.input_files == 5
    assert summary.rows == {"cloudtrail_events": 0, "cloudtrail_quarantine": 0}
    frames = tables(lake)
    assert frames["cloudtrail_events"].count() == 28992 + 1
    assert frames["cloudtrail_quarantine"].count() == 1
