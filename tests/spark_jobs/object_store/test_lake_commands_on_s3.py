"""``lake optimize|vacuum|restore|history`` on a lake in a bucket (the real S3-compatible server), in this
process's SparkSession: every command works there and the rows stay exact."""

from __future__ import annotations

import argparse
import io
import json

from spark_jobs.cli import lake as lake_cli
from tools.sample_data import write_sample_landing


def _lake(s3_spark, *args: str) -> list[dict]:
    parser = argparse.ArgumentParser()
    lake_cli.add_arguments(parser)
    out = io.StringIO()
    assert lake_cli.run(parser.parse_args(list(args)), spark=s3_spark, out=out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def test_optimize_restore_vacuum_and_history_on_a_bucket(s3, s3_env, s3_spark, bucket, run_job_s3, tmp_path):
    from deltalake import DeltaTable

    from spark_jobs.model.object_store import delta_rs_options

    landing = tmp_path / "landing"
    manifest = write_sample_landing(landing, files=6, records_per_file=10, seed=5, include_bad_files=False)
    trail, lake = bucket("maint-trail"), f"{bucket('maint-lake')}/lake"
    s3.upload(landing, trail.removeprefix("s3a://"))
    run_job_s3(f"{trail}/AWSLogs", lake, maxFilesPerTrigger="1")  # several small commits per day
    table = f"{lake}/tables/cloudtrail_events"

    def event_ids() -> list[str]:
        dt = DeltaTable(table, storage_options=delta_rs_options(table))
        return sorted(dt.to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist())

    expected = sorted(manifest.good_event_ids)
    assert event_ids() == expected
    before = DeltaTable(table, storage_options=delta_rs_options(table)).version()

    [result] = _lake(s3_spark, "optimize", "--table", "cloudtrail_events", "--lake", lake)
    assert result["files_removed"] > result["files_added"] > 0 and result["version"] == before + 1
    assert event_ids() == expected

    [restored] = _lake(s3_spark, "restore", "--table", "cloudtrail_events", "--lake", lake, "--to-version",
                       str(before), "--yes")
    assert restored["restored_version"] == before and restored["version"] == before + 2
    assert event_ids() == expected and DeltaTable(table, storage_options=delta_rs_options(table)).version() == \
        before + 2

    [vacuumed] = _lake(s3_spark, "vacuum", "--table", "cloudtrail_events", "--lake", lake)
    assert vacuumed["files_deleted"] == 0  # within the 7-day retention nothing may go
    history = _lake(s3_spark, "history", "--table", "cloudtrail_events", "--lake", lake, "--format", "json")
    operations = [h["operation"] for h in history]
    assert operations.index("RESTORE") < operations.index("OPTIMIZE") < operations.index("MERGE")  # newest first
    assert event_ids() == expected
