"""kill -9 in the middle of a micro-batch with the input in one bucket and the lake in another, twice, then a
restart: exact tables. While a killed batch's Parquet objects lie in the table's prefix (uploaded, never
committed), delta-rs sees exactly the committed rows (as tests/spark_jobs/test_crash_recovery.py on disk).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from urllib.parse import unquote

import fsspec

from tools.sample_data import write_sample_landing
from tests.conftest import PROJECT_ROOT
from tests.spark_jobs.conftest import file_name


def _fs():
    return fsspec.filesystem("s3a")


def _batch_ids(folder: str) -> set[int]:
    try:
        names = _fs().ls(folder, detail=False)
    except FileNotFoundError:
        return set()
    return {int(n.rsplit("/", 1)[-1]) for n in names if n.rsplit("/", 1)[-1].isdigit()}


def _uncommitted_files(table: str) -> set[str]:
    """Parquet objects under the table that no commit of its Delta log added."""
    fs, added = _fs(), set()
    for commit in fs.glob(f"{table}/_delta_log/*.json"):
        for line in fs.cat_file(commit).decode().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    prefix = table.removeprefix("s3a://")
    return {p.removeprefix(prefix + "/") for p in fs.find(table) if p.endswith(".parquet")} - added


def _kill_mid_batch(process, checkpoint: str, after_commits: int, table: str | None) -> tuple[int, int]:
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        assert process.poll() is None, "the job ended before it could be killed"
        commits, offsets = _batch_ids(f"{checkpoint}/commits"), _batch_ids(f"{checkpoint}/offsets")
        if len(commits) >= after_commits and offsets - commits and (table is None or _uncommitted_files(table)):
            commits, offsets = _batch_ids(f"{checkpoint}/commits"), _batch_ids(f"{checkpoint}/offsets")
            if offsets - commits:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return max(commits), max(offsets - commits)
        time.sleep(0.05)
    raise AssertionError("no micro-batch was in flight within 420 s")


def _delta_rs_sees_only_committed_rows(table: str, seen: set[str]) -> int:
    import deltalake
    import pyarrow.parquet as pq

    from spark_jobs.model.object_store import delta_rs_options

    dt = deltalake.DeltaTable(table, storage_options=delta_rs_options(table))
    ids = dt.to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist()
    committed = sum(int(h["operationMetrics"]["numTargetRowsInserted"]) for h in dt.history()
                    if h["operation"] == "MERGE")
    assert len(ids) == len(set(ids)) == committed
    orphans = _uncommitted_files(table) - seen
    seen |= orphans
    fs = _fs()
    orphan_ids = {i for f in orphans
                  for i in pq.read_table(f"{table.removeprefix('s3a://')}/{f}", columns=["eventID"],
                                         filesystem=fs).column("eventID").to_pylist()}
    assert not orphan_ids & set(ids)  # not one row of the uncommitted batch
    return len(orphan_ids)


def test_kill_9_mid_batch_twice_with_the_lake_in_a_bucket_then_restart_gives_exact_tables(
        s3, s3_env, bucket, run_job_s3, tmp_path):
    landing = tmp_path / "landing"
    manifest = write_sample_landing(landing, files=10, records_per_file=20, seed=3)
    trail, lake = bucket("trail"), f"{bucket('lake')}/lake"
    s3.upload(landing, trail.removeprefix("s3a://"))
    checkpoint, events = f"{lake}/checkpoints/cloudtrail_etl", f"{lake}/tables/cloudtrail_events"
    command = [sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--input", f"{trail}/AWSLogs/",
               "--lake", lake, "--max-files-per-trigger", "3"]

    kills, orphan_rows, seen = [], [], set()
    # The first kill waits until the batch in flight has uploaded event files, not committed them.
    for after_commits, table in ((1, events), (2, None)):
        log = tmp_path / f"kill-{after_commits}.log"
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                   start_new_session=True)
        kills.append(_kill_mid_batch(process, checkpoint, after_commits, table))
        orphan_rows.append(_delta_rs_sees_only_committed_rows(events, seen))
    for committed, in_flight in kills:
        assert in_flight == committed + 1  # each kill hit a planned, uncommitted batch
    assert orphan_rows[0] > 0  # the killed batch's objects were there, with rows delta-rs did not show

    final = run_job_s3(f"{trail}/AWSLogs/", lake, maxFilesPerTrigger="3")
    assert final.skipped is None and final.batches >= 1, final
    assert _batch_ids(f"{checkpoint}/offsets") == _batch_ids(f"{checkpoint}/commits")

    import deltalake

    from spark_jobs.model.object_store import delta_rs_options

    ids = deltalake.DeltaTable(events, storage_options=delta_rs_options(events)).to_pyarrow_table(
        columns=["eventID"]).column("eventID").to_pylist()
    assert Counter(ids) == Counter(manifest.good_event_ids) and len(ids) == len(set(ids))
    quarantine = f"{lake}/tables/cloudtrail_quarantine"
    rows = deltalake.DeltaTable(quarantine, storage_options=delta_rs_options(quarantine)).to_pyarrow_table().to_pylist()
    assert sorted((file_name(r["source_file"]), r["record_index"], r["reason"]) for r in rows) == sorted(
        (b.path.name, b.record_index, b.reason) for b in manifest.bad)
