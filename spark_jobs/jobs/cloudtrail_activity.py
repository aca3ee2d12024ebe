"""cloudtrail_activity: CloudTrail events counted per event-time window, late events kept in a ledger.

Usage::

    python -m spark_jobs run cloudtrail_activity --trigger available-now        # catch up, then stop
    python -m spark_jobs run cloudtrail_activity --trigger processing-time:30s  # until SIGTERM
    python -m spark_jobs sql "SELECT window_start, eventName, events FROM cloudtrail_activity
                              WHERE window_kind = 'tumbling_5m' AND is_error ORDER BY events DESC"

Reads ``cloudtrail_events`` as a stream (Delta's streaming source) and writes:

- ``cloudtrail_activity``: events per window (each window of the registry's ``event_time``: a tumbling
  one and a sliding one), account (``recipientAccountId``), ``eventSource``, ``eventName`` and
  error/no-error, with the account's name, owner team and environment from the ``accounts`` file
  (``account_known`` false for an account it does not list). The aggregation runs in update mode with
  the registry's watermark: each micro-batch MERGEs the windows it changed (a late event within the
  watermark corrects its window's row), so a reader always sees whole batches (Delta versions).
- ``cloudtrail_late_events``: every event that came after the watermark had closed one of its
  windows, once per such window, with the watermark it missed and how late it was. Spark drops these
  rows inside its aggregation (``numRowsDroppedByWatermark`` counts them, after its partial
  aggregation: one per late window key); the ledger finds the same rows by Spark's own rule: in
  micro-batch N a row is late when ``window.end <= `` the watermark of batch N-1 (see
  :mod:`spark_jobs.transforms.windows`), applied to the rows batch N read from ``cloudtrail_events``
  (the data files between its offsets, :mod:`spark_jobs.driver.write.stateful`). So per micro-batch,
  the ledger's distinct late window keys equal Spark's ``numRowsDroppedByWatermark``.

**State**: the aggregation's (``stateStoreSave``, operator 0 of the checkpoint): one row per open
window key (window kind, window, account, eventSource, eventName, error), evicted when the watermark
passes the window's end. So it holds about ``(watermark delay + window size) / slide`` windows per
key, whatever the stream's length. Read it with ``python -m spark_jobs state cloudtrail_activity``.

The query reads the table through one source (one offset per batch in the checkpoint).
:func:`transform` is pure: the same function runs on the stream and on a batch read of the table
(where nothing is late).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.driver.job_contract import BatchContext
from spark_jobs.transforms.conform import table_schema
from spark_jobs.transforms.enrich import enrich
from spark_jobs.transforms.windows import WINDOW_KIND, is_late, windowed
from spark_jobs.model.jobs import JobSpec

KEY_COLUMNS = ["account_id", "eventSource", "eventName", "is_error"]
EVENT_COLUMNS = ["eventID", "eventTime", "errorCode", "awsRegion", "sourceIPAddress"]



def _events(source: DataFrame, job: JobSpec) -> DataFrame:
    """The columns the job uses (the event time keeps its watermark, ignored in batch)."""
    return source.select(
        F.col(job.event_time.column).alias("eventTime"), "eventID", F.col("recipientAccountId").alias("account_id"),
        "eventSource", "eventName", F.col("errorCode").isNotNull().alias("is_error"), "errorCode", "awsRegion",
        "sourceIPAddress")


def transform(source: DataFrame, job: JobSpec) -> DataFrame:
    """Event counts per window and key of ``cloudtrail_events`` rows (stream or batch).

    :param source: rows of ``cloudtrail_events``.
    :param job: the registry entry (its ``event_time``: column, watermark, windows).
    :returns: ``window_kind``, ``window_start``, ``window_end``, the key columns and ``events``.
    """
    events = _events(source.withWatermark(job.event_time.column, job.event_time.watermark_delay), job)
    counts = (windowed(events, job.event_time, ["eventTime", *KEY_COLUMNS])
              .groupBy(WINDOW_KIND, "window", *KEY_COLUMNS).agg(F.count(F.lit(1)).alias("events")))
    return counts.select(WINDOW_KIND, F.col("window.start").alias("window_start"),
                         F.col("window.end").alias("window_end"), *KEY_COLUMNS, "events")


def _with_accounts(frame: DataFrame, context: BatchContext) -> DataFrame:
    return enrich(frame, context.dimensions["accounts"], "account_id", "account_known")


def activity(result: DataFrame, context: BatchContext) -> DataFrame:
    """Rows of ``cloudtrail_activity``: the windows this batch changed, with their current counts (the driver
    conforms them to the table's declared schema)."""
    windows = result.withColumn("date", F.to_date("window_start"))
    return _with_accounts(windows, context).withColumn("updated_at", F.lit(context.batch_time))


def late_events(result: DataFrame, context: BatchContext) -> DataFrame:
    """Rows of ``cloudtrail_late_events``: the events this micro-batch read whose window the watermark had
    closed (Spark's rule, with the previous batch's watermark); none in batch mode or while the
    watermark is still 0 (the first two micro-batches of a stream)."""
    table = context.job.table("cloudtrail_late_events")
    if not context.late_watermark_ms or context.source_batch is None:
        return context.spark.createDataFrame([], table_schema(table.schema))
    watermark = F.timestamp_millis(F.lit(context.late_watermark_ms))
    events = _events(context.source_batch(), context.job)
    late = (windowed(events, context.job.event_time, [*KEY_COLUMNS, *EVENT_COLUMNS])
            .where(is_late(F.col("window"), context.late_watermark_ms))
            .select(F.to_date("eventTime").alias("date"), "eventID", WINDOW_KIND,
                    F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "eventTime", *KEY_COLUMNS, "errorCode", "awsRegion", "sourceIPAddress",
                    watermark.alias("watermark"),
                    ((F.lit(context.late_watermark_ms) - F.unix_millis("eventTime")) / 1000)
                    .alias("seconds_behind_watermark"),
                    ((F.lit(context.late_watermark_ms) - F.unix_millis(F.col("window.end"))) / 1000)
                    .alias("window_closed_seconds"),
                    F.lit(context.batch_id).alias("batch_id"), F.lit(context.batch_time).alias("recorded_at")))
    return _with_accounts(late, context)


OUTPUTS = {"cloudtrail_activity": activity, "cloudtrail_late_events": late_events}
