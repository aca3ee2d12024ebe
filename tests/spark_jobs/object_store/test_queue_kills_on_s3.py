"""A few of the queue-mode kill trials (tools/bench/queue_kills.py; `python -m spark_jobs trial queue-kills` runs
ten or more): real `python -m spark_jobs run` drivers reading moto's real S3 event notifications, each process group
(the Python driver and its JVM) killed with kill -9 at a random moment; then drivers run until the queue is empty.
Every landed event is in the table exactly once, every landed object is a source file of it, no message is left."""

from __future__ import annotations

from collections import Counter

from tools.bench.queue_kills import run_trials

NOT_IN_THE_FAST_TIER = "the trials start real `python -m spark_jobs run` drivers (a JVM each) in subprocesses"


def test_queue_mode_drivers_killed_at_random_moments_lose_and_duplicate_nothing(s3, s3_env, tmp_path):
    report = run_trials(s3, tmp_path, kills=2, seed=64, files_per_trial=3, records_per_file=4)
    assert report["events_expected"] == 2 * 3 * 4
    assert report["rows"] == report["distinct_event_ids"] == report["events_expected"]
    assert (report["duplicated_events"], report["missing_events"], report["unexpected_events"]) == (0, 0, 0)
    assert report["objects_missing_from_table"] == [] and report["queue_at_end"] == (0, 0)
    assert report["passed"] is True, report
    assert Counter(r["killed"] or r["exit"] == 0 for r in report["trials"]) == Counter({True: 2})
