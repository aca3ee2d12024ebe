"""A backfill reads copied historical logs whatever their modification times (a wide maxFileAge).

Spark's file source forgets, and never reads, a file whose modification time is more than
``maxFileAge`` (7 days by default) older than the newest file its checkpoint has seen. Historical
logs copied from S3 keep their old modification times, so a backfill resumed after more of them were
copied in would skip them without a word. The backfill's runs set a wide ``maxFileAge``; the file
source is run here as the backfill runs it (its options, a checkpoint, available-now), without the job.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

from spark_jobs.control.backfill import check_request

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


def listed_by_two_runs(spark, source: Path, checkpoint: Path, options: dict, name: str) -> list[str]:
    """The files Spark's file source (with ``options``) reads in two available-now runs on one checkpoint:
    one before and one after two copies with 30-day-old modification times land."""
    from spark_jobs.driver.source_readers import BINARY_FILE_SCHEMA

    read: list[str] = []

    def run() -> None:
        (spark.readStream.format("binaryFile").schema(BINARY_FILE_SCHEMA).options(**options).load(str(source))
         .select("path").writeStream.queryName(name)
         .foreachBatch(lambda batch, _id: read.extend(r.path for r in batch.collect()))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination(300))

    deliver(source, "a", "new")
    run()
    deliver(source, "b", "old-1", THIRTY_DAYS)  # copied in after the first run, with their S3 mtimes
    deliver(source, "c", "old-2", THIRTY_DAYS + 3600)
    run()
    return sorted(path.rsplit("_", 1)[-1] for path in read)


def test_files_copied_later_with_old_mtimes_are_still_read(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT_ROOTS", str(tmp_path))
    (tmp_path / "history").mkdir()
    request = check_request("cloudtrail_etl", str(tmp_path / "history"), None, None)

    read = listed_by_two_runs(spark, tmp_path / "history", tmp_path / "checkpoint", request.file_source_options(),
                              "file_age_backfill")

    assert read == ["a.json.gz", "b.json.gz", "c.json.gz"]


def test_with_the_registrys_options_the_old_copies_are_skipped(spark, tmp_path):
    from spark_jobs.registry import get_job

    read = listed_by_two_runs(spark, tmp_path / "history", tmp_path / "checkpoint",
                              dict(get_job("cloudtrail_etl").file_source_options), "file_age_registry")

    assert read == ["a.json.gz"]  # what a backfill would lose without its wide maxFileAge
