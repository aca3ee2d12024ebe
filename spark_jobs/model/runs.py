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
    :param file_dates: ``(first, last)``: only files whose delivery date (:func:`file_date_column`) lies
        in this range are parsed (a backfill); ``None``: every file.
    :param expected_files: the files this run should process (a backfill's listing), for its progress
        lines (done / total, ETA); ``None``: no total known.
    :param progress_history: record each micro-batch's progress in ``streaming_progress`` (when the
        job's ``ProgressHistory`` is enabled); the benchmark switches it off to measure its cost.
    :param file_times: ``(start, end)``, aware datetimes, end exclusive: only files whose delivery time
        (:func:`file_time_column`) lies in this window are parsed (a backfill of one Airflow data
        interval); ``None``: no window.
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

    def stream_name(self, job: str) -> str:
        """The query's name, and its checkpoint's and control folder's: ``job`` or ``job@writer``."""
        return job if not self.writer else f"{job}@{self.writer}"

    def checkpoint_path(self, job: str) -> Path:
        return self.lake.checkpoint_path(self.stream_name(job))

    def control_path(self, job: str) -> Path:
        return self.lake.control_path(self.stream_name(job))
