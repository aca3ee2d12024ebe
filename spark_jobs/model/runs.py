"""How one run of a job is asked for: :class:`RunOptions` (no pyspark).

The command line, the DAGs' spark-submit, backfills and tests build one; the driver's runner
(:mod:`spark_jobs.driver.runner`) runs the job's query with it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model.lake import Lake
from spark_jobs.model.triggers import Trigger


@dataclass(frozen=True)
class RunOptions:
    """How to run a job; every field has been validated by :func:`resolve_input` and friends.

    :param input_path: the landing folder.
    :param lake: where tables and the checkpoint live.
    :param trigger: when micro-batches run.
    :param file_source_options: the registry's file-source options with command-line overrides.
    :param lease_ttl_seconds: the ttl of the driver's lease on the checkpoint; ``None``: the
        registry's ``HealthThresholds.lease_ttl_seconds``.
    :param writer: ``None`` for the job's own stream; a name (``backfill-2024``) for another writer of
        the same tables, with its own checkpoint ``<lake>/checkpoints/<job>@<writer>``, control folder
        and query name. Writers run at the same time safely (Delta's optimistic concurrency) and each
        is exactly once (its own ``txnAppId``).
    :param file_dates: ``(first, last)``: only files whose delivery date (the job's key layout,
        :meth:`~spark_jobs.model.layout.KeyLayout.delivery_date`) lies in this range are read (a backfill);
        ``None``: every file.
    :param expected_files: the files this run should process (a backfill's listing), for its progress
        lines (done / total, ETA); ``None``: no total known.
    :param progress_history: record each micro-batch's progress in ``streaming_progress`` (when the
        job's ``ProgressHistory`` is enabled); the benchmark switches it off to measure its cost.
    :param file_times: ``(start, end)``, aware datetimes, end exclusive: only files whose delivery time
        (:meth:`~spark_jobs.model.layout.KeyLayout.delivery_time`) lies in this window are read (a backfill of one
        Airflow data interval); ``None``: no window.
    :param start_at: a new stream (no checkpoint yet) ignores files delivered before this: it starts from now,
        or from a given time, without listing the history (which comes in by backfill); ``None``: from the start.
    :param lookback: the discovery window, overriding the key layout's (``6 hours``); ``None``: the layout's.
    :param queue_url: read S3 event notifications from this SQS queue instead of listing the bucket.
    :param file_list: a JSON file of the exact files to read (a reconcile); ``None``: discover them.
    :param standby: start, warm up and wait for the checkpoint's lease, then take over
        (:mod:`spark_jobs.driver.standby`); a continuous run only.
    :param preflight: a standby of a new version: checked against the live checkpoint and tables before it warms
        up (:mod:`spark_jobs.driver.preflight`), refused without touching them when it does not fit.
    """

    input_path: Path
    lake: Lake
    trigger: Trigger
    file_source_options: dict[str, str]
    lease_ttl_seconds: float | None = None
    writer: str | None = None
    file_dates: tuple[dt.date, dt.date] | None = None
    expected_files: int | None = None
    progress_history: bool = True
    file_times: tuple[dt.datetime, dt.datetime] | None = None
    start_at: dt.datetime | None = None
    lookback: str | None = None
    queue_url: str | None = None
    file_list: str | None = None
    standby: bool = False
    preflight: bool = False

    @property
    def delivered(self) -> tuple[dt.datetime, dt.datetime] | None:
        """The delivery-time range a backfill selects (end exclusive), from its dates or its time window."""
        if self.file_times is not None:
            return self.file_times
        if self.file_dates is None:
            return None
        first, last = self.file_dates
        return (dt.datetime(first.year, first.month, first.day, tzinfo=dt.timezone.utc),
                dt.datetime(last.year, last.month, last.day, tzinfo=dt.timezone.utc) + dt.timedelta(days=1)
                if last < dt.date.max else dt.datetime.max.replace(tzinfo=dt.timezone.utc))

    def stream_name(self, job: str) -> str:
        """The query's name, and its checkpoint's and control folder's: ``job`` or ``job@writer``."""
        return job if not self.writer else f"{job}@{self.writer}"

    def checkpoint_path(self, job: str) -> Path:
        return self.lake.checkpoint_path(self.stream_name(job))

    def control_path(self, job: str) -> Path:
        return self.lake.control_path(self.stream_name(job))
