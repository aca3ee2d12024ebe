"""A backfill reads copied historical logs whatever their modification times (a wide maxFileAge).

Spark's file source forgets, and never reads, a file whose modification time is more than
``maxFileAge`` (7 days by default) older than the newest file its checkpoint has seen. Historical
logs copied from S3 keep their old modification times, so a backfill resumed after more of them were
copied in would skip them without a word. The backfill's runs set a wide ``maxFileAge``.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

from spark_jobs.backfill import check_request
from spark_jobs.lake import Lake

FOLDER = "AWSLogs/1/CloudTrail/us-east-1/2024/03/01"
THIRTY_DAYS = 30 * 24 * 3600


def deliver(source: Path, name: str, event_id: str, age_seconds: float = 0) -> None:
    """One CloudTrail delivery with one event, its modification time ``age_seconds`` in the past."""
    path = source / FOLDER / f"1_CloudTrail_us-east-1_20240301T0800Z_{name}.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps({"Records": [{"eventVersion": "1.08", "eventID": event_id,
                                                            "eventTime": "2024-03-01T08:00:00Z"}]}).encode()))
    moment = time.time() - age_seconds
    os.utime(path, (moment, moment))


def test_files_copied_later_with_old_mtimes_are_still_read(spark, tmp_path, monkeypatch):
    from spark_jobs.runner import RunOptions, run_streaming
    from spark_jobs.triggers import parse_trigger

    source = tmp_path / "history"
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT_ROOTS", str(tmp_path))
    deliver(source, "a", "new")
    request = check_request("cloudtrail_etl", str(source), None, None)
    run = RunOptions(source, Lake(tmp_path / "lake"), parse_trigger("available-now"), request.file_source_options(),
                     writer=request.writer)

    run_streaming(request.job, run, spark=spark)
    deliver(source, "b", "old-1", THIRTY_DAYS)  # copied in after the first run, with their S3 mtimes
    deliver(source, "c", "old-2", THIRTY_DAYS + 3600)
    run_streaming(request.job, run, spark=spark)

    table = spark.read.format("delta").load(str(tmp_path / "lake" / "tables" / "cloudtrail_events"))
    # With the registry's options (maxFileAge 7 days) the second run reads neither old copy (verified once by
    # hand: ["new"]); the backfill's read both.
    assert sorted(r.eventID for r in table.collect()) == ["new", "old-1", "old-2"]
