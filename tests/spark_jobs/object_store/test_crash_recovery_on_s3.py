"""kill -9 in the middle of a micro-batch with the input in one bucket and the lake in another, twice, then a
restart: exact tables. While a killed batch's Parquet objects lie in the table's prefix (uploaded, never
committed), delta-rs sees exactly the committed rows (as tests/spark_jobs/live_path/test_random_kills.py on disk).
"""

from __future__ import annotations

from collections import Counter

from spark_jobs.model.lake import as_path
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import file_name
# The kill harness reads the checkpoint and the table's folder through pathlib's API, which the lake's UPath
# paths (s3fs underneath) give on a bucket as well.
from tests.helpers.kills import JobDriver, delta_rs_sees_only_committed_rows, kills_leaving_orphans, run_command
from tests.helpers.processes import batch_ids


def test_kill_9_mid_batch_twice_with_the_lake_in_a_bucket_then_restart_gives_exact_tables(
        s3, s3_env, bucket, run_job_s3, tmp_path):
    landing = tmp_path / "landing"
    manifest = write_sample_landing(landing, files=10, records_per_file=20, seed=3)
    trail, lake = bucket("trail"), f"{bucket('lake')}/lake"
    s3.upload(landing, trail.removeprefix("s3a://"))
    checkpoint, events = as_path(f"{lake}/checkpoints/cloudtrail_etl"), as_path(f"{lake}/tables/cloudtrail_events")
    command = run_command("cloudtrail_etl", "--input", f"{trail}/AWSLogs/", "--lake", lake,
                          "--max-files-per-trigger", "3")

    seen: set[str] = set()
    kills, orphan_rows = kills_leaving_orphans(
        lambda n: JobDriver(command, tmp_path / f"kill-{n}.log"), checkpoint, events, after_commits=1,
        orphan_rows=lambda: delta_rs_sees_only_committed_rows(events, seen),
        last_gap=2, last_delay=0.0)
    for kill in kills:
        assert kill.in_flight == kill.committed + 1  # each kill hit a planned, uncommitted batch
    assert orphan_rows[0] > 0  # the first killed batch's objects were there, with rows delta-rs did not show

    final = run_job_s3(f"{trail}/AWSLogs/", lake, maxFilesPerTrigger="3")
    assert final.skipped is None and final.batches >= 1, final
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits")

    import deltalake

    from spark_jobs.model.object_store import delta_rs_options

    ids = deltalake.DeltaTable(str(events), storage_options=delta_rs_options(lake)).to_pyarrow_table(
        columns=["eventID"]).column("eventID").to_pylist()
    assert Counter(ids) == Counter(manifest.good_event_ids) and len(ids) == len(set(ids))
    quarantine = f"{lake}/tables/cloudtrail_quarantine"
    rows = deltalake.DeltaTable(quarantine, storage_options=delta_rs_options(quarantine)).to_pyarrow_table().to_pylist()
    assert sorted((file_name(r["source_file"]), r["record_index"], r["reason"]) for r in rows) == sorted(
        (b.path.name, b.record_index, b.reason) for b in manifest.bad)
