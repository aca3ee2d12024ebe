"""cloudtrail_etl_catchup run for real by ``airflow dags test``: spark-submit, tables, exactly once.

The DAG runs twice over a small landing folder in tmp_path, with the Makefile's environment except
for the lake, the input and Airflow's home: the runs go to a copy of the session's freshly migrated
metadata DB in tmp_path, so the tests neither depend on nor add to the state of the project's
``.airflow``. Each run spark-submits a local Spark (~40-60 s); the tables are read in the session's
SparkSession.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from spark_jobs.transforms.cloudtrail import reasons
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.catchup_runs import DAG_ID, TABLES, CatchupRuns, table_files, tail

# file name -> (eventID, eventTime) of its records; dates are the UTC dates of eventTime.
GOOD_FILES = {
    "123456789012_CloudTrail_us-east-1_20240301T0800Z_a.json.gz": [
        ("ev-a1", "2024-03-01T08:15:00Z"), ("ev-a2", "2024-03-01T23:59:59Z")],
    "123456789012_CloudTrail_us-east-1_20240302T0000Z_b.json.gz": [
        ("ev-b1", "2024-03-02T00:00:00Z"), ("ev-b2", "2024-03-02T12:30:00Z")],
    "123456789012_CloudTrail_us-east-1_20240302T1800Z_c.json.gz": [
        ("ev-c1", "2024-03-01T10:00:00Z"), ("ev-c2", "2024-03-02T18:45:10Z")],
}
BAD_FILE = "123456789012_CloudTrail_us-east-1_20240302T1900Z_bad.json.gz"
EXPECTED_EVENTS = sorted((event_id, event_time[:10]) for records in GOOD_FILES.values()
                         for event_id, event_time in records)


def write_landing(landing: Path) -> None:
    """The files as S3 delivers them: gzipped ``{"Records": [...]}`` under AWSLogs/.../YYYY/MM/DD/."""
    folder = landing / "AWSLogs" / "123456789012" / "CloudTrail" / "us-east-1" / "2024" / "03" / "02"
    folder.mkdir(parents=True)
    for name, records in GOOD_FILES.items():
        document = {"Records": [{"eventVersion": "1.08", "eventID": event_id, "eventTime": event_time,
                                 "eventSource": "s3.amazonaws.com", "eventName": "GetObject",
                                 "awsRegion": "us-east-1"} for event_id, event_time in records]}
        (folder / name).write_bytes(gzip.compress(json.dumps(document).encode()))
    (folder / BAD_FILE).write_bytes(gzip.compress(b'{"Records": [ this is not JSON ]}'))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, migrated_db) -> CatchupRuns:
    require_airflow_env()
    runs = CatchupRuns(tmp_path_factory.mktemp("catchup_dag"), migrated_db)
    write_landing(runs.landing)
    return runs


@pytest.fixture(scope="module")
def first_run(runs, spark):
    """The first run over the landing folder, and the tables it left, read before anything else runs."""
    done = runs.dags_test()
    assert done.returncode == 0, f"airflow dags test {DAG_ID} failed (exit {done.returncode}):\n{tail(done)}"
    rows = runs.query(
        spark,
        "SELECT 'event' AS kind, eventID AS id, CAST(date AS STRING) AS day, NULL AS reason, "
        "NULL AS record_index FROM cloudtrail_events UNION ALL "
        "SELECT 'quarantine', regexp_extract(source_file, '[^/]+$', 0), NULL, reason, record_index "
        "FROM cloudtrail_quarantine")
    return {"rows": rows, "files": table_files(runs.lake), "asset_events": runs.asset_events(),
            "run_ids": runs.run_ids()}


@pytest.fixture(scope="module")
def second_run(runs, first_run):
    """A rerun with no new files."""
    done = runs.dags_test()
    return {"done": done, "files": table_files(runs.lake), "asset_events": runs.asset_events(),
            "run_ids": runs.run_ids()}


def test_each_event_lands_once_under_its_utc_date(first_run):
    events = sorted((r["id"], r["day"]) for r in first_run["rows"] if r["kind"] == "event")
    assert events == EXPECTED_EVENTS
    assert len(events) == 6


def test_events_table_is_partitioned_by_both_dates(first_run):
    partitions = {Path(f).parts[2] for f in first_run["files"] if Path(f).parts[1] == "cloudtrail_events"}
    assert partitions == {"_delta_log", "date=2024-03-01", "date=2024-03-02"}


def test_invalid_json_file_is_quarantined_once(first_run):
    quarantined = [(r["id"], r["reason"], r["record_index"]) for r in first_run["rows"] if r["kind"] == "quarantine"]
    assert quarantined == [(BAD_FILE, reasons.INVALID_JSON, None)]


def test_run_emits_an_asset_event_per_table(first_run):
    [run_id] = first_run["run_ids"]
    assert first_run["asset_events"] == [(table, run_id) for table in TABLES]


def test_rerun_with_no_new_files_writes_nothing(first_run, second_run):
    done = second_run["done"]
    assert done.returncode == 0, f"second airflow dags test {DAG_ID} failed (exit {done.returncode}):\n{tail(done)}"
    assert len(second_run["run_ids"]) == 2
    assert second_run["files"] == first_run["files"]
