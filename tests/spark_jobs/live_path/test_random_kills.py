"""kill -9 in the middle of live micro-batches on the time-bounded path: the tables equal an uninterrupted run's,
and while a killed batch's files lie in the table's folder no reader sees them.

The landing folder holds only good CloudTrail deliveries named with their delivery times, so every batch
takes the pipelined pass whose MERGE is bounded by the files' delivery times (checked in the Delta log).
Each killed driver is a real ``python -m spark_jobs run`` process (its JVM dies with it):

- the first is killed once its batch in flight has written whole Parquet files that no Delta commit added
  (:func:`tests.helpers.kills.kill_with_files_uncommitted`); delta-rs, a reader that is not Spark, then sees
  exactly the committed rows and not one row of those files: the Delta log, not the folder, is the table;
- the others after a random delay from the moment a batch is planned (its offsets written, its commit not),
  drawn from a seeded generator: the seed and the delays are in the assertion messages, so a failure can be
  replayed.

The restart that finishes the job, and the uninterrupted run it is compared with, run in the session's
SparkSession. (The quarantine across kills is proven with bad files on a bucket,
tests/spark_jobs/object_store/test_crash_recovery_on_s3.py, and for Cowrie in test_real_cowrie_samples.py.)
"""

from __future__ import annotations

import os
import random
from collections import Counter

from tests.helpers.delta_log import merge_commits
from tests.helpers.kills import delta_rs_sees_only_committed_rows, kill_mid_batch, kill_with_files_uncommitted, \
    start_cloudtrail_driver
from tests.helpers.processes import batch_ids
from tools.sample_data import write_sample_landing

SEED = int(os.environ.get("RANDOM_KILLS_SEED", "2711"))
RANDOM_KILLS = 2
EVENTS, QUARANTINE = "cloudtrail_events", "cloudtrail_quarantine"


def _rows(frame) -> Counter:
    return Counter(tuple(row) for row in frame.select(*sorted(frame.columns)).collect())


def test_kill_9_at_random_points_leaves_the_tables_of_an_uninterrupted_run(tmp_path, run_job, tables):
    landing = tmp_path / "landing"
    manifest = write_sample_landing(landing, files=24, records_per_file=40, seed=11, include_bad_files=False)
    reference = run_job(landing, tmp_path / "reference", maxFilesPerTrigger="3")
    assert reference.skipped is None and reference.batches == 8, reference

    rng = random.Random(SEED)
    lake = tmp_path / "lake"
    checkpoint, events = lake / "checkpoints" / "cloudtrail_etl", lake / "tables" / EVENTS
    with start_cloudtrail_driver(landing, lake, tmp_path / "kill-0.log") as driver:
        kills = [kill_with_files_uncommitted(driver, checkpoint, events, after_commits=1)]
    orphan_rows = delta_rs_sees_only_committed_rows(events)
    assert orphan_rows > 0, kills  # the killed batch's files were there, with rows delta-rs did not show
    for n in range(1, 1 + RANDOM_KILLS):  # a random 0-2 s after a batch is planned, drawn again if it commits first
        with start_cloudtrail_driver(landing, lake, tmp_path / f"kill-{n}.log") as driver:
            after = len(batch_ids(checkpoint / "commits")) + rng.randint(0, 1)
            kills.append(kill_mid_batch(driver, checkpoint, after, lambda: round(rng.uniform(0.0, 2.0), 2)))
    where = f"seed {SEED}, kills {kills}"
    assert all(k.in_flight == k.committed + 1 for k in kills), where

    final = run_job(landing, lake, maxFilesPerTrigger="3")
    assert final.skipped is None and final.batches >= 1, (final, where)
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits"), where

    got, expected = tables(lake), tables(tmp_path / "reference")
    ids = [r.eventID for r in got[EVENTS].select("eventID").collect()]
    assert len(ids) == len(set(ids)) == len(manifest.good_event_ids) == 24 * 40, where
    assert _rows(got[EVENTS]) == _rows(expected[EVENTS]), where  # row for row, every column
    assert got[QUARANTINE].count() == expected[QUARANTINE].count() == 0, where
    assert any("eventTime" in m["predicate"] for m in merge_commits(events)), \
        f"no MERGE of {events} was bounded by eventTime ({where})"
