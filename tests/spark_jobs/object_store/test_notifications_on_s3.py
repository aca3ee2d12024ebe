"""File-notification mode for real: files land in a bucket whose S3 event notifications go to an SQS queue (both
served by moto on 127.0.0.1, which sends the same event JSON S3 sends); the driver reads the queue, never
lists the bucket. Two drivers are killed with kill -9 mid-batch, a third finishes: the tables hold every event
once and exactly the quarantine of an uninterrupted run, an object deleted after its notification is
quarantined as ``file_gone``, and every message ends deleted (spark_jobs/control/discovery/notifications.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

from tools.sample_data import write_sample_landing
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.cloudtrail import file_name
from tests.helpers.kills import JobDriver, kill_mid_batch, run_command
from tests.helpers.processes import batch_ids
from tests.helpers.s3_fixtures import notification_queue, queue_counts

VISIBILITY_SECONDS = 5


def test_notifications_reach_the_tables_exactly_once_across_two_kills_and_a_deleted_object_is_quarantined(
        s3, s3_env, bucket, tmp_path, monkeypatch):
    import deltalake

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    manifest = write_sample_landing(landing, files=10, records_per_file=20, seed=3)
    trail = bucket("trail")
    name = trail.removeprefix("s3a://")
    sqs, url = notification_queue(s3, name)
    s3.upload(landing, name)
    gone = "AWSLogs/111122223333/CloudTrail/us-east-1/2024/03/01/111122223333_CloudTrail_us-east-1_20240301T0900Z_gone.json.gz"
    s3.client().put_object(Bucket=name, Key=gone, Body=b"{}")
    s3.client().delete_object(Bucket=name, Key=gone)  # its notification stays in the queue
    monkeypatch.setenv("CLOUDTRAIL_ETL_QUEUE_VISIBILITY_SECONDS", str(VISIBILITY_SECONDS))
    command = run_command("cloudtrail_etl", "--input", f"{trail}/AWSLogs/", "--lake", str(lake),
                          "--max-files-per-trigger", "3", "--queue-url", url)
    checkpoint = lake / "checkpoints" / "cloudtrail_etl"

    with JobDriver(command, tmp_path / "run-0.log") as driver:
        first = kill_mid_batch(driver, checkpoint, after_commits=1, delay=0.3)
    with JobDriver(command, tmp_path / "run-1.log") as driver:
        second = kill_mid_batch(driver, checkpoint, after_commits=first.committed + 2, delay=0.0)
    assert second.committed > first.committed
    deadline = time.monotonic() + 60  # what the killed drivers had received comes back after its visibility timeout
    while queue_counts(sqs, url)[1] and time.monotonic() < deadline:
        time.sleep(0.5)
    final = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits")

    events = deltalake.DeltaTable(str(lake / "tables" / "cloudtrail_events")).to_pyarrow_table(
        columns=["eventID"]).column("eventID").to_pylist()
    assert Counter(events) == Counter(manifest.good_event_ids) and len(events) == len(set(events))
    quarantine = deltalake.DeltaTable(str(lake / "tables" / "cloudtrail_quarantine")).to_pyarrow_table().to_pylist()
    got = sorted((file_name(r["source_file"]), r["record_index"], r["reason"]) for r in quarantine)
    assert got == sorted([(b.path.name, b.record_index, b.reason) for b in manifest.bad]
                         + [(gone.rsplit("/", 1)[-1], None, "file_gone")])
    # every message deleted: those of committed batches, the test event, the hidden and ignored names
    assert queue_counts(sqs, url) == (0, 0)
    status = json.loads((checkpoint / "discovery" / "status.json").read_text())
    assert status["mode"] == "notifications" and status["queue"]["visible"] == 0
    inspect = subprocess.run([sys.executable, "-m", "spark_jobs", "checkpoint", "inspect", "cloudtrail_etl", "--lake",
                              str(lake), "--input", f"{trail}/AWSLogs/", "--json"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "CLOUDTRAIL_ETL_QUEUE_URL": url})
    report = json.loads(inspect.stdout)
    assert report["discovery"]["queue"]["visible"] == 0 and report["backlog_files"] == 0
    assert s3.secret_key not in json.dumps(report) + final.stdout + final.stderr
