"""Command-line overrides of a Kafka job's source options (no pyspark: checked before any JVM starts)."""

from __future__ import annotations

from datetime import datetime

from spark_jobs.model.errors import UsageError, positive_int
from spark_jobs.model.times import parse_utc


def parse_time(text: str, flag: str) -> datetime:
    """An ISO-8601 time (``2024-03-02T08:00:00Z``; no zone means UTC) as an aware UTC datetime.

    :raises UsageError: naming ``flag`` and the bad text.
    """
    try:
        return parse_utc(text, flag)
    except UsageError:
        raise UsageError(f"{flag} {text!r} is not an ISO-8601 time; write it like 2024-03-02T08:00:00Z") from None


def run_overrides(max_offsets_per_trigger: str | None, starting_timestamp: str | None) -> dict[str, str]:
    """Spark Kafka source options from ``run --max-offsets-per-trigger N --starting-timestamp T``.

    ``startingTimestamp`` applies to a first start only (a checkpoint's offsets win over it); Spark
    fails the query when a partition has no message at or after it unless told otherwise, so
    ``startingOffsetsByTimestampStrategy`` is ``latest`` (such a partition starts at its end).

    :raises UsageError: naming the flag and the bad value.
    """
    options: dict[str, str] = {}
    if max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(positive_int(max_offsets_per_trigger, "--max-offsets-per-trigger"))
    if starting_timestamp is not None:
        moment = parse_time(starting_timestamp, "--starting-timestamp")
        options["startingTimestamp"] = str(int(moment.timestamp() * 1000))
        options["startingOffsetsByTimestampStrategy"] = "latest"
    return options
