"""The real CloudTrail samples read from one bucket, the lake in another, through the command line's contract.

``python -m spark_jobs run cloudtrail_etl --input s3a://... --lake s3a://...`` with only the standard AWS
variables set (pointing at the local S3 server): every record once in the table or in quarantine, exactly
as on local disk (tests/spark_jobs/jobs/test_real_cloudtrail_samples.py); a rerun adds nothing; every reader
of the lake (delta-rs, ``sql --engine duckdb``, ``checkpoint inspect``, ``status``, ``lake history``)
reads it there; and the secret key appears in no output, no command line, no object of the lake.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from tests.helpers.project import PROJECT_ROOT, run_cli
from tests.helpers.cloudtrail import source_records
from tests.helpers.s3_fixtures import SECRET

pytestmark = pytest.mark.real_data
INVALID_FILE = "zmallen_cloudtrail2sightings/cloudtrail.zip/aws.execution.ec2-user-data.json"
# The CloudTrail layout: s3://BUCKET/AWSLogs/ACCOUNT/CloudTrail/REGION/YYYY/MM/DD/<files>
PREFIX = "AWSLogs/123456789012/CloudTrail/us-east-1/2024/01/15"


def _run_watching_ps(args: list[str], log) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``python -m spark_jobs ARGS``; sample every process's command line while it runs."""
    process = subprocess.Popen([sys.executable, "-m", "spark_jobs", *args], cwd=PROJECT_ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=log.open("w"))
    command_lines = []
    while process.poll() is None:
        command_lines += subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
        time.sleep(2)
    stdout = process.communicate()[0]
    return subprocess.CompletedProcess(args, process.returncode, stdout, log.read_text()), command_lines


@pytest.fixture(scope="module")
def ingested(real_cloudtrail, s3, bucket, tmp_path_factory):
    from _pytest.monkeypatch import MonkeyPatch

    patch = MonkeyPatch()
    for key, value in s3.environment().items():
        patch.setenv(key, value)
    patch.delenv("LAKE_ROOT", raising=False)
    root = tmp_path_factory.mktemp("real-s3")
    trail, lake_bucket = bucket("cloudtrail"), bucket("lake")
    uploaded = s3.upload(real_cloudtrail, trail.removeprefix("s3a://"), PREFIX)
    lake = f"{lake_bucket}/lake"
    args = ["run", "cloudtrail_etl", "--input", f"{trail}/AWSLogs/", "--lake", lake, "--max-files-per-trigger", "2000"]
    first, command_lines = _run_watching_ps(args, root / "first.log")
    assert first.returncode == 0, first.stderr[-3000:]
    rerun, more_lines = _run_watching_ps(args, root / "rerun.log")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    manifest = {}
    with (real_cloudtrail.parent / "MANIFEST.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["path"].startswith("cloudtrail/"):
                records = row["records"]
                manifest[row["path"].removeprefix("cloudtrail/")] = int(records) if records.isdigit() else 0
    yield {"uploaded": uploaded, "trail": trail, "lake": lake, "first": first, "rerun": rerun,
           "command_lines": command_lines + more_lines, "manifest": manifest, "samples": real_cloudtrail}
    patch.undo()


def _delta(path: str):
    from deltalake import DeltaTable

    from spark_jobs.model.object_store import delta_rs_options

    return DeltaTable(path, storage_options=delta_rs_options(path))


def _relative(uri: str, trail: str) -> str:
    return uri.split(f"{trail.removeprefix('s3a://')}/{PREFIX}/", 1)[1]


def test_every_real_record_is_in_the_table_once_or_in_quarantine_and_a_rerun_adds_nothing(ingested, s3_env):
    manifest, trail, lake = ingested["manifest"], ingested["trail"], ingested["lake"]
    assert ingested["uploaded"] == len(manifest) == 1239 and sum(manifest.values()) == 30481
    assert json.loads(ingested["first"].stdout.splitlines()[-1])["rows"] == {
        "cloudtrail_events": 28992 + 1, "cloudtrail_quarantine": 1}
    deliveries = defaultdict(list)
    for path in manifest:
        if path != INVALID_FILE:
            for index, record in enumerate(source_records(ingested["samples"] / path)):
                deliveries[record["eventID"]].append((path, index))
    assert sum(map(len, deliveries.values())) == 30481 and len(deliveries) == 28992
    events = _delta(f"{lake}/tables/cloudtrail_events").to_pyarrow_table(
        columns=["_source_file", "_record_index", "eventID"]).to_pylist()
    assert len(events) == len({r["eventID"] for r in events}) == 28992 + 1
    kept = {r["eventID"]: (_relative(r["_source_file"], trail), r["_record_index"]) for r in events}
    for event_id, places in deliveries.items():
        assert kept[event_id] == min(places), event_id  # the first delivery is the one kept, as on local disk
    quarantine = _delta(f"{lake}/tables/cloudtrail_quarantine").to_pyarrow_table(columns=["source_file"]).to_pylist()
    assert [_relative(r["source_file"], trail) for r in quarantine] == [INVALID_FILE]

    rerun = json.loads(ingested["rerun"].stdout.splitlines()[-1])
    assert rerun["rows"] == {"cloudtrail_events": 0, "cloudtrail_quarantine": 0} and rerun["input_files"] == 0
    assert len(_delta(f"{lake}/tables/cloudtrail_events").to_pyarrow_table(columns=["eventID"])) == 28992 + 1


def test_the_readers_read_the_lake_in_the_bucket(ingested, s3_env):
    lake, trail = ingested["lake"], ingested["trail"]
    query = run_cli("sql", "--lake", lake, "--engine", "duckdb", "--format", "json",
                    "SELECT count(*) AS n, count(DISTINCT eventID) AS ids FROM cloudtrail_events")
    assert query.returncode == 0, query.stderr[-2000:]
    assert json.loads(query.stdout.splitlines()[0]) == {"n": 28993, "ids": 28993}

    inspected = run_cli("checkpoint", "inspect", "cloudtrail_etl", "--lake", lake, "--input", f"{trail}/AWSLogs/",
                        "--json")
    assert inspected.returncode == 0, inspected.stderr[-2000:]
    report = json.loads(inspected.stdout)
    assert (report["status"], report["problems"], report["backlog_files"], report["latest_commit_batch"]) == (
        "idle", [], 0, 0), report
    assert report["input"] == f"{trail}/AWSLogs" and report["in_flight_files"] == 0

    status = run_cli("status", "--lake", lake, "--json")
    assert status.returncode in (0, 1), status.stderr[-2000:]
    [etl] = [job for job in json.loads(status.stdout)["jobs"] if job["job"] == "cloudtrail_etl"]
    assert (etl["state"], etl["latest_commit_batch"]) == ("idle", 0), etl

    history = run_cli("lake", "history", "--lake", lake, "--table", "cloudtrail_events", "--format", "json")
    assert history.returncode == 0, history.stderr[-2000:]
    operations = [json.loads(line)["operation"] for line in history.stdout.splitlines()]
    assert operations.count("CREATE TABLE") == 1 and len(operations) >= 2, operations
    ingested["reader_outputs"] = [query, inspected, status, history]


def test_no_secret_in_any_output_command_line_or_object(ingested, s3, s3_env):
    outputs = [ingested["first"], ingested["rerun"], *ingested.get("reader_outputs", [])]
    assert ingested["command_lines"] and any("spark_jobs" in line for line in ingested["command_lines"])
    assert not [line for line in ingested["command_lines"] if SECRET in line]
    for done in outputs:
        assert SECRET not in done.stdout and SECRET not in done.stderr
    client = s3.client()
    bucket = ingested["lake"].removeprefix("s3a://").split("/")[0]
    keys = [obj["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for obj in page.get("Contents", [])]
    assert any(key.startswith("lake/checkpoints/cloudtrail_etl/commits/") for key in keys)
    assert any(key.startswith("lake/tables/streaming_progress/") for key in keys)
    for key in keys:  # tables (events, quarantine, progress), checkpoint, lease, control files
        assert SECRET.encode() not in client.get_object(Bucket=bucket, Key=key)["Body"].read(), key
