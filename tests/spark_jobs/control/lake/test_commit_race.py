"""Which errors of a Delta commit made through Spark are a lost race, redone from a fresh snapshot
(:func:`spark_jobs.control.lake.commit_race.lost_commit_race`). Delta's real conflicts, raised by a real
transaction, are checked in ``tests/spark_jobs/driver/write/test_held_files.py``; here, the texts a conflict
does not have and the local file system's race for a log file."""

from __future__ import annotations

import pytest

from spark_jobs.control.lake.commit_race import lost_commit_race


class ConcurrentAppendException(Exception):
    """A stand-in named as Delta's Python-side class (``delta.exceptions.ConcurrentAppendException``)."""


@pytest.mark.parametrize("error, lost", [
    (ConcurrentAppendException("Files were added to partition [date=2024-03-02] by a concurrent update."), True),
    (Exception("io.delta.exceptions.MetadataChangedException: [DELTA_METADATA_CHANGED] The metadata of the Delta "
               "table has been changed by a concurrent update."), True),
    (Exception("[DELTA_CONCURRENT_DELETE_READ] ConcurrentDeleteReadException: This transaction attempted to read "
               "one or more files that were deleted"), True),
    (Exception("java.io.FileNotFoundException: File file:/lake/cloudtrail_events/_delta_log/00000000000000000007.json "
               "does not exist"), True),
    (Exception("java.io.FileNotFoundException: File file:/lake/cloudtrail_events/date=2024-03-02/part-0.parquet "
               "does not exist"), False),
    (Exception("java.util.ConcurrentModificationException"), False),
    (Exception("[DELTA_MERGE_MISSING_WHEN] There must be at least one WHEN clause in a MERGE statement."), False),
    (ValueError("a batch of 3 rows does not fit the table's schema"), False),
], ids=["type", "metadata_changed", "error_class", "log_file_not_found", "data_file_not_found",
        "not_deltas_concurrency", "other_delta_error", "not_delta"])
def test_only_a_lost_commit_race_is_redone(error, lost):
    assert lost_commit_race(error) is lost
