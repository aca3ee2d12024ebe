"""Queue-mode kill trials: ``kill -9`` of an available-now driver reading S3 event notifications, at random moments.

Usage::

    python -m spark_jobs trial queue-kills --kills 10 [--seed 1] [--files-per-trial 4]

A local S3/SQS server (moto, :mod:`tools.s3_server`) holds a bucket whose real bucket notification configuration
sends ``s3:ObjectCreated:*`` events to a queue. Each trial lands CloudTrail files (half before the driver starts,
half while it runs, some with S3 event times minutes or an hour ahead of the driver's clock), starts ``python -m
spark_jobs run cloudtrail_etl --queue-url URL --trigger available-now`` in a process group of its own and
``kill -9``s the group (the Python driver and its JVM) a random moment later, whatever it is doing. Then drivers
run uninterrupted until the queue is empty. The trial passes when every landed event is in ``cloudtrail_events``
exactly once (rows == distinct eventIDs == expected), every landed object is a source file of the table, and the
queue holds no message. The report (JSON) goes to stdout and ``.spark/bench/trial-queue-kills.json``; exit status
0 when it passed. ``tests/spark_jobs/object_store/test_queue_kills_on_s3.py`` runs two trials of it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT

TRIAL_ROOT = PROJECT_ROOT / ".spark" / "bench"
VISIBILITY_SECONDS = 4  # what a killed driver had received comes back this soon
KILL_WINDOW_S = (1.0, 25.0)  # a driver's JVM start, query start and first batches fall in it on 2 cores
SKEWS_S = (0, 300, 3600)  # S3 event times ahead of the driver's clock, in turn
FINAL_RUNS = 6


def notification_queue(s3, bucket_name: str) -> tuple[object, str]:
    """An SQS queue on the server of ``s3`` (a :class:`tools.s3_server.LocalS3`) that receives the bucket's
    ``s3:ObjectCreated:*`` events through its real bucket notification configuration; the client and its URL."""
    import boto3

    sqs = boto3.client("sqs", endpoint_url=s3.endpoint, region_name="us-east-1",
                       aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key)
    url = sqs.create_queue(QueueName=f"{bucket_name}-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.client().put_bucket_notification_configuration(Bucket=bucket_name, NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]})
    return sqs, url


def queue_counts(sqs, url: str) -> tuple[int, int]:
    """The queue's messages waiting and received-not-deleted (SQS's approximate counts; exact on moto)."""
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _upload(s3, bucket: str, files: list[Path], landing: Path, skew: float) -> None:
    s3.events_ahead(skew)
    client = s3.client()
    for path in files:
        client.upload_file(str(path), bucket, path.relative_to(landing).as_posix())


def _kill_group(process: subprocess.Popen) -> int:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return process.wait(30)


def _table(lake: Path) -> tuple[list[str], set[str]]:
    """The events table's eventIDs and source files (delta-rs, no JVM)."""
    import deltalake

    path = lake / "tables" / "cloudtrail_events"
    if not (path / "_delta_log").is_dir():
        return [], set()
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["eventID", "_source_file"])
    return table.column("eventID").to_pylist(), set(table.column("_source_file").to_pylist())


def run_trials(s3, root: Path, kills: int, seed: int = 1, files_per_trial: int = 4,
               records_per_file: int = 5) -> dict:
    """``kills`` kill trials and the runs that finish the queue, on the server of ``s3``, under ``root``."""
    from tools.sample_data import write_sample_landing

    rng = random.Random(seed)
    landing, lake = root / "landing", root / "lake"
    bucket = s3.create_bucket(f"queue-kills-{rng.getrandbits(32):08x}").removeprefix("s3a://")
    sqs, url = notification_queue(s3, bucket)
    env = {**os.environ, **s3.environment(), "CLOUDTRAIL_ETL_QUEUE_VISIBILITY_SECONDS": str(VISIBILITY_SECONDS)}
    env.pop("LAKE_ROOT", None)
    command = [sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--input", f"s3a://{bucket}/AWSLogs/",
               "--lake", str(lake), "--queue-url", url, "--trigger", "available-now", "--max-files-per-trigger", "2"]
    expected: list[str] = []
    landed: set[str] = set()
    started = time.monotonic()
    records, log = [], root / "drivers.log"

    def land(trial: int) -> tuple[list[Path], float]:
        folder = landing / f"t{trial}"
        manifest = write_sample_landing(folder, files=files_per_trial, records_per_file=records_per_file,
                                        seed=seed * 1000 + trial, include_bad_files=False,
                                        start=dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
                                        + dt.timedelta(hours=6 * trial))
        expected.extend(manifest.good_event_ids)
        landed.update(f"s3a://{bucket}/{Path(p).relative_to(folder).as_posix()}" for p in manifest.files_written)
        return [Path(p) for p in manifest.files_written], SKEWS_S[trial % len(SKEWS_S)]

    for trial in range(kills):
        files, skew = land(trial)
        half = len(files) // 2
        _upload(s3, bucket, files[:half], landing / f"t{trial}", skew)
        with log.open("ab") as out:
            driver = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        later = threading.Thread(target=lambda: (time.sleep(rng.uniform(0.5, 8.0)),
                                                 _upload(s3, bucket, files[half:], landing / f"t{trial}", skew)))
        later.start()
        delay = rng.uniform(*KILL_WINDOW_S)
        try:
            driver.wait(delay)
            status, killed = driver.returncode, False
        except subprocess.TimeoutExpired:
            status, killed = _kill_group(driver), True
        later.join()
        commits = lake / "checkpoints" / "cloudtrail_etl" / "commits"
        records.append({"trial": trial, "kill_after_s": round(delay, 2), "killed": killed, "exit": status,
                        "event_skew_s": skew, "commits_so_far": len(list(commits.glob("[0-9]*"))) if commits.is_dir()
                        else 0, "queue_after": queue_counts(sqs, url)})
    finals = []
    for _ in range(FINAL_RUNS):
        deadline = time.monotonic() + VISIBILITY_SECONDS * 4 + 30
        while queue_counts(sqs, url)[1] and time.monotonic() < deadline:  # the killed drivers' messages come back
            time.sleep(0.5)
        done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
        summary = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() \
            else {"exit": done.returncode, "stderr": done.stderr[-2000:]}
        finals.append(summary)
        if done.returncode == 0 and summary.get("batches") == 0 and queue_counts(sqs, url) == (0, 0):
            break  # a run found nothing and nothing is left in the queue
    ids, sources = _table(lake)
    counts = Counter(ids)
    skipped = lake / "checkpoints" / "cloudtrail_etl" / "discovery" / "skipped.json"
    report = {
        "trial": "queue-kills", "kills_asked": kills, "seed": seed,
        "kills_landed": sum(r["killed"] for r in records), "finished_before_kill": sum(not r["killed"] for r in records),
        "kill_moments_s": [r["kill_after_s"] for r in records], "objects_landed": len(landed),
        "events_expected": len(expected), "rows": len(ids), "distinct_event_ids": len(counts),
        "duplicated_events": sum(1 for n in counts.values() if n > 1),
        "missing_events": len(set(expected) - set(counts)), "unexpected_events": len(set(counts) - set(expected)),
        "objects_missing_from_table": sorted(landed - sources), "queue_at_end": queue_counts(sqs, url),
        "messages_not_loaded": json.loads(skipped.read_text())["total"] if skipped.exists() else {},
        "final_runs": len(finals), "seconds": round(time.monotonic() - started, 1), "trials": records,
        "finals": finals,
    }
    report["passed"] = (report["rows"] == report["distinct_event_ids"] == len(expected)
                        and Counter(expected) == counts and not report["objects_missing_from_table"]
                        and report["queue_at_end"] == (0, 0))
    return report


def main(argv: list[str] | None = None, prog: str = "python -m tools.bench.queue_kills") -> int:
    """``python -m spark_jobs trial queue-kills``: run the trials on a local S3/SQS server of their own."""
    from tools.s3_server import LocalS3

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="drivers killed with kill -9 (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the files and the kill moments (default 1)")
    parser.add_argument("--files-per-trial", type=int, default=4, help="files landed per trial (default 4)")
    args = parser.parse_args(argv)
    root = TRIAL_ROOT / "trial-queue-kills"
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    with LocalS3(log_path=work / "moto.log", event_clock=work / "event-clock") as s3:
        report = run_trials(s3, work, args.kills, args.seed, args.files_per_trial)
    text = json.dumps(report, indent=2, default=str)
    (TRIAL_ROOT / "trial-queue-kills.json").write_text(text)
    print(text)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
