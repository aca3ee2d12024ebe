"""The quarantine rule of a rollout's probation: the new version's share against the previous one's, from
``streaming_progress`` rows written as the recorder writes them (delta-rs)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from spark_jobs.control.monitoring.progress import SCHEMA, append_rows
from spark_jobs.control.rollout.probation import probation_rows, quarantine_share, quarantine_verdict
from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")
NOW = datetime.now(timezone.utc)


def row(batch: int, version: str, good: int, bad: int) -> dict:
    values = {name: None for name in SCHEMA.names}
    return {**values, "stream": JOB.name, "job": JOB.name, "query_id": "q", "run_id": version, "batch_id": batch,
            "timestamp": NOW, "date": NOW.date(), "recorded_at": NOW, "version": version,
            "rows": {"cloudtrail_events": good, "cloudtrail_quarantine": bad}}


def test_the_share_weighs_rows_not_batches():
    assert quarantine_share(JOB, [row(0, "v1", 90, 10), row(1, "v1", 0, 0), row(2, "v1", 10, 90)]) == (0.5, 200)
    assert quarantine_share(JOB, []) == (None, 0)


@pytest.mark.parametrize("new, verdict", [
    ([row(5, "v2", 40, 60)], "its batches quarantined 60.0% of 100 rows, the previous version's 2.0% (more than 3 "
                             "times as much and 10% more)"),
    ([row(5, "v2", 93, 7)], None),  # more than 3x, but within the margin: a batch of ordinary bad files
    ([row(5, "v2", 0, 0)], None),  # nothing carried yet: nothing to judge
])
def test_a_new_version_is_judged_by_both_a_ratio_and_a_margin(new, verdict):
    previous = [row(b, "v1", 49, 1) for b in range(5)]

    assert quarantine_verdict(JOB, new, previous, factor=3, margin=0.1) == verdict


def test_the_rows_of_each_version_come_from_the_progress_history(tmp_path):
    append_rows(tmp_path, [row(0, "v1", 49, 1), row(1, "v1", 48, 2), row(2, "v2", 10, 40), row(3, "v9", 1, 1)])

    new, old = probation_rows(tmp_path, JOB, "v2", "v1")

    assert [r["batch_id"] for r in new] == [2] and [r["batch_id"] for r in old] == [0, 1]
    assert [r["batch_id"] for r in probation_rows(tmp_path, JOB, "v2", None)[1]] == [0, 1, 3]
