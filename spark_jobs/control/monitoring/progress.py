"""Every micro-batch's progress as a row of the lake's ``streaming_progress`` Delta table.

The driver's polling loop (which already reads ``query.recentProgress`` for its log lines) hands
each finished micro-batch's progress (Spark's typed ``StreamingQueryProgress``: its fields are read)
to a :class:`ProgressRecorder`, with what only the runner knows (the batch's input files and its rows
per table) and the batch's exact rates read from the JVM's progress object (the progress JSON behind
``recentProgress`` rounds rates to one decimal: 0.6676 files/s becomes 0.7). The recorder turns it
into a row at once, then a daemon thread of its own samples the backlog (the checkpoint library's listing, as
``checkpoint inspect`` computes it) and appends buffered rows with delta-rs (``deltalake``, no JVM),
at most every ``ProgressHistory.flush_seconds`` and when the run ends. So the streaming query's own
thread never waits on a Delta commit: a delta-spark commit per micro-batch would cost a Spark job
and a log replay per batch (seconds on 2 cores), delta-rs appends a few hundred bytes in
milliseconds. The same thread keeps the table bounded: it deletes whole days older than
``retention_days``, compacts small files every ``compact_every_commits`` appends and vacuums.

Why not a Python ``StreamingQueryListener``: its callbacks arrive asynchronously, after the query
and possibly the driver have ended (the runner reads ``query.recentProgress`` for the same reason),
and PySpark turns each event into Python objects with dozens of py4j calls on the driver's Python
process, which also runs ``foreachBatch``: a version that used one measured 4-6% slower runs
(``python -m tools.bench.progress_cost``); the polling loop costs four py4j calls per batch.

Rows are keyed by ``stream`` (the job, or ``job@writer`` for another writer such as a backfill),
``query_id`` (stable for a checkpoint), ``run_id`` (one per start) and ``batch_id``. A batch has one
row: progress is reported after the batch committed, and a batch re-run after a crash is one that
never committed. Rows still buffered when a driver is killed with ``kill -9`` are lost (at most
``flush_seconds`` of them); the checkpoint is the truth, this table is its history.

Nothing here imports pyspark: the progress objects are read by their attributes only.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import as_path
from spark_jobs.model.object_store import delta_rs_options, is_url

from spark_jobs.model.policies import ProgressHistory

from spark_jobs.registry import STREAMING_PROGRESS

log = logging.getLogger("spark_jobs.control.monitoring")

PROGRESS_TABLE = STREAMING_PROGRESS.name
MAX_BUFFERED_ROWS = 10_000  # a lake that refuses writes for long loses the oldest rows, not the driver's memory
MAINTENANCE_EVERY_SECONDS = 3600.0
VACUUM_RETENTION_HOURS = 1  # files replaced by a compaction stay an hour for readers of older versions

_COUNTS = pa.map_(pa.string(), pa.int64())
_TEXTS = pa.map_(pa.string(), pa.string())
_UTC = pa.timestamp("us", tz="UTC")

STATE_OPERATOR = pa.struct([
    ("operator_name", pa.string()), ("num_rows_total", pa.int64()), ("num_rows_updated", pa.int64()),
    ("num_rows_removed", pa.int64()), ("memory_used_bytes", pa.int64()),
    ("num_rows_dropped_by_watermark", pa.int64()), ("num_state_store_instances", pa.int64()),
    ("commit_time_ms", pa.int64()), ("custom_metrics", _COUNTS),
])
SOURCE = pa.struct([
    ("description", pa.string()), ("start_offset", pa.string()), ("end_offset", pa.string()),
    ("latest_offset", pa.string()), ("num_input_rows", pa.int64()), ("input_rows_per_second", pa.float64()),
    ("processed_rows_per_second", pa.float64()), ("metrics", _TEXTS),
])
SINK = pa.struct([("description", pa.string()), ("num_output_rows", pa.int64()), ("metrics", _TEXTS)])

#: The table's schema; ``date`` (the UTC date of ``timestamp``) is its partition column.
SCHEMA = pa.schema([
    ("stream", pa.string()),                   # the job, or job@writer
    ("job", pa.string()),
    ("query_id", pa.string()),
    ("run_id", pa.string()),
    ("batch_id", pa.int64()),
    ("timestamp", _UTC),                       # when the trigger started (Spark's progress.timestamp)
    ("date", pa.date32()),
    ("batch_duration_ms", pa.int64()),
    ("duration_ms", _COUNTS),                  # Spark's durationMs: addBatch, latestOffset, walCommit, ...
    ("num_input_rows", pa.int64()),
    ("input_rows_per_second", pa.float64()),
    ("processed_rows_per_second", pa.float64()),
    ("input_files", pa.int64()),               # the runner's count (the source's numInputRows counts reads)
    ("rows", _COUNTS),                         # rows the batch carried, per table
    ("rows_inserted", _COUNTS),                # rows new to each table (0 for keys it held)
    ("quarantine_rate", pa.float64()),         # the quarantine table's share of the batch's rows
    ("state_rows_total", pa.int64()),          # over the stateful operators
    ("state_memory_bytes", pa.int64()),
    ("rows_dropped_by_watermark", pa.int64()),
    ("watermark", _UTC),
    ("event_time_min", _UTC),
    ("event_time_max", _UTC),
    ("event_time_avg", _UTC),
    ("backlog_files", pa.int64()),             # input files waiting when the row was recorded
    ("backlog_age_seconds", pa.float64()),     # how long the oldest of them had waited (discovering jobs)
    ("state_operators", pa.list_(STATE_OPERATOR)),
    ("sources", pa.list_(SOURCE)),
    ("sink", SINK),
    ("recorded_at", _UTC),
    ("version", pa.string()),                  # the code version that ran the batch (spark_jobs.launch.version)
])
PARTITION_BY = ("date",)


def _root(lake_root: str | Path) -> Path:
    """The lake root as given (a local path), or an object store's URL as a ``UPath``."""
    return as_path(lake_root) if is_url(lake_root) else Path(lake_root)


def progress_table_path(lake_root: str | Path) -> Path:
    """``<lake>/tables/streaming_progress``."""
    return _root(lake_root) / "tables" / PROGRESS_TABLE


def _time(text: str | None) -> datetime | None:
    """One of Spark's progress times (``2026-11-23T18:00:00.123Z``) as an aware UTC datetime."""
    if not text:
        return None
    return datetime.fromisoformat(text).astimezone(timezone.utc)


def _rate(value) -> float | None:
    """A rate from the progress object: Spark leaves NaN/infinite rates out (None here)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def executed(progress) -> bool:
    """Whether a progress object reports a micro-batch that ran (an idle trigger reports one too,
    with the next batch's id, no ``addBatch`` and no input)."""
    return "addBatch" in (progress.durationMs or {}) or bool(progress.numInputRows)


def quarantine_rate(job: JobSpec, rows: dict[str, int] | None) -> float | None:
    """The quarantine tables' share of the rows a batch carried; None for a batch without rows."""
    if not rows:
        return None
    total = sum(rows.values())
    if not total:
        return None
    bad = sum(count for table, count in rows.items() if table in job.quarantine_tables)
    return bad / total


def progress_row(progress, *, job: JobSpec, stream: str, rates: tuple[float, float] | None = None,
                 rows: dict[str, int] | None = None, rows_inserted: dict[str, int] | None = None,
                 input_files: int | None = None, backlog_files: int | None = None,
                 recorded_at: datetime | None = None, version: str | None = None) -> dict:
    """One row of :data:`SCHEMA` from Spark's typed progress object (its fields).

    :param progress: a ``StreamingQueryProgress``.
    :param rates: the batch's (input, processing) rates read from the JVM's progress object, which
        replace the object's when it came through the progress JSON (rounded to one decimal).
    :param job: the registry job.
    :param stream: ``job`` or ``job@writer``.
    :param rows: rows the batch carried per table (the runner counts them).
    :param rows_inserted: rows new to each table.
    :param input_files: the batch's input files.
    :param backlog_files: input files waiting (sampled by the recorder).
    :param version: the name of the code version that ran the batch (:mod:`spark_jobs.launch.version`).
    """
    started = _time(progress.timestamp)
    operators = list(progress.stateOperators or [])
    event_time = dict(progress.eventTime or {})
    sink = progress.sink
    return {
        "stream": stream,
        "job": job.name,
        "query_id": str(progress.id),
        "run_id": str(progress.runId),
        "batch_id": int(progress.batchId),
        "timestamp": started,
        "date": started.date() if started else None,
        "batch_duration_ms": progress.batchDuration,
        "duration_ms": {str(k): int(v) for k, v in (progress.durationMs or {}).items()},
        "num_input_rows": progress.numInputRows,
        "input_rows_per_second": _rate(rates[0] if rates else progress.inputRowsPerSecond),
        "processed_rows_per_second": _rate(rates[1] if rates else progress.processedRowsPerSecond),
        "input_files": input_files,
        "rows": dict(rows) if rows is not None else None,
        "rows_inserted": dict(rows_inserted) if rows_inserted is not None else None,
        "quarantine_rate": quarantine_rate(job, rows),
        "state_rows_total": sum(op.numRowsTotal for op in operators) if operators else None,
        "state_memory_bytes": sum(op.memoryUsedBytes for op in operators) if operators else None,
        "rows_dropped_by_watermark": sum(op.numRowsDroppedByWatermark for op in operators) if operators else None,
        "watermark": _time(event_time.get("watermark")),
        "event_time_min": _time(event_time.get("min")),
        "event_time_max": _time(event_time.get("max")),
        "event_time_avg": _time(event_time.get("avg")),
        "backlog_files": backlog_files,
        "backlog_age_seconds": None,
        "state_operators": [{
            "operator_name": op.operatorName, "num_rows_total": op.numRowsTotal,
            "num_rows_updated": op.numRowsUpdated, "num_rows_removed": op.numRowsRemoved,
            "memory_used_bytes": op.memoryUsedBytes, "num_rows_dropped_by_watermark": op.numRowsDroppedByWatermark,
            "num_state_store_instances": op.numStateStoreInstances, "commit_time_ms": op.commitTimeMs,
            "custom_metrics": {str(k): int(v) for k, v in (op.customMetrics or {}).items()},
        } for op in operators],
        "sources": [{
            "description": source.description, "start_offset": source.startOffset, "end_offset": source.endOffset,
            "latest_offset": source.latestOffset, "num_input_rows": source.numInputRows,
            "input_rows_per_second": _rate(source.inputRowsPerSecond),
            "processed_rows_per_second": _rate(source.processedRowsPerSecond),
            "metrics": {str(k): str(v) for k, v in (source.metrics or {}).items()},
        } for source in (progress.sources or [])],
        "sink": {"description": sink.description, "num_output_rows": sink.numOutputRows,
                 "metrics": {str(k): str(v) for k, v in (sink.metrics or {}).items()}} if sink is not None else None,
        "recorded_at": recorded_at or datetime.now(timezone.utc),
        "version": version,
    }


def append_rows(lake_root: str | Path, rows: list[dict]) -> None:
    """Append ``rows`` to ``streaming_progress`` in one Delta commit (delta-rs; the first one creates it)."""
    from spark_jobs.control.lake import delta_append

    if not rows:
        return
    path = progress_table_path(lake_root)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    # two writers creating the table at once: the loser appends again (delta_append retries only that)
    # schema_mode merge: a table written before a column was added to SCHEMA gets it (NULL in its older rows)
    delta_append.append(str(path), table, partition_by=list(PARTITION_BY), schema_mode="merge",
                        storage_options=delta_rs_options(path))


def apply_retention(lake_root: str | Path, retention_days: int, now: datetime | None = None) -> dict:
    """Delete the days older than ``retention_days`` (whole partitions: no file is rewritten).

    :returns: delta-rs's delete metrics (``num_removed_files``, ...), or ``{}`` without a table.
    """
    from deltalake import DeltaTable

    path = progress_table_path(lake_root)
    if not (path / "_delta_log").is_dir():
        return {}
    cutoff = ((now or datetime.now(timezone.utc)) - timedelta(days=retention_days)).date()
    return DeltaTable(str(path), storage_options=delta_rs_options(path)).delete(f"date < '{cutoff.isoformat()}'")


def compact(lake_root: str | Path) -> dict:
    """Compact the table's small files (one per append) and vacuum the replaced ones after an hour."""
    from deltalake import DeltaTable

    path = progress_table_path(lake_root)
    table = DeltaTable(str(path), storage_options=delta_rs_options(path))
    metrics = table.optimize.compact()
    table.vacuum(retention_hours=VACUUM_RETENTION_HOURS, enforce_retention_duration=False, dry_run=False)
    return metrics


@dataclass
class _Entry:
    row: dict
    sample_backlog: bool


class ProgressRecorder:
    """Buffers a driver's progress rows and appends them to ``streaming_progress`` from its own thread.

    :param lake_root: the lake.
    :param job: the registry job (its ``progress`` settings and quarantine tables).
    :param stream: ``job`` or ``job@writer``.
    :param input_path: the stream's input folder, for the backlog samples; None: no samples.
    :param settings: default: the job's ``ProgressHistory``.
    :param version: the code version every row names (default: this process's, :mod:`spark_jobs.launch.version`).
    """

    def __init__(self, lake_root: str | Path, job: JobSpec, stream: str, input_path: str | None = None,
                 settings: ProgressHistory | None = None, version: str | None = None) -> None:
        from spark_jobs.launch.version import current

        self.version = version or current().name
        self.lake_root = _root(lake_root)
        self.job = job
        self.stream = stream
        self.input_path = input_path
        self.settings = settings or job.progress
        self.stats = {"rows": 0, "appends": 0, "sample_seconds": 0.0, "append_seconds": 0.0, "thread_cpu_seconds": 0.0}
        self._queue: queue.Queue[_Entry | None] = queue.Queue()
        self._buffer: list[dict] = []
        self._first_buffered: float | None = None
        self._maintained_at: float | None = None
        self._thread = threading.Thread(target=self._work, name=f"progress-{stream}", daemon=True)
        self._thread.start()

    def record(self, progress, *, rates: tuple[float, float] | None = None, rows: dict[str, int] | None = None,
               rows_inserted: dict[str, int] | None = None, input_files: int | None = None) -> None:
        """Take one finished micro-batch's progress (cheap: the row is built here, written later);
        the arguments are :func:`progress_row`'s."""
        row = progress_row(progress, job=self.job, stream=self.stream, rates=rates, rows=rows,
                           rows_inserted=rows_inserted, input_files=input_files, version=self.version)
        self._queue.put(_Entry(row, sample_backlog=self.input_path is not None))

    def close(self, timeout: float = 60.0) -> None:
        """Write every buffered row (one append) and stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("progress history of %s: %d rows not written within %.0f s of the end", self.stream,
                        len(self._buffer), timeout)
        stats = {key: round(value, 3) if isinstance(value, float) else value for key, value in self.stats.items()}
        log.info("progress history of %s: %d rows in %d appends to %s; off the query's thread: backlog samples "
                 "%.2f s, appends %.2f s, recorder thread CPU %.2f s", self.stream, stats["rows"], stats["appends"],
                 progress_table_path(self.lake_root), stats["sample_seconds"], stats["append_seconds"],
                 stats["thread_cpu_seconds"], extra={"history_stats": stats})

    # -- the recorder's thread --------------------------------------------------------------------

    def _work(self) -> None:
        closing = False
        while not closing:
            wait = None
            if self._first_buffered is not None:
                wait = max(0.0, self.settings.flush_seconds - (time.monotonic() - self._first_buffered))
            try:
                entry = self._queue.get(timeout=wait)
            except queue.Empty:
                entry = False
            if entry is None:
                closing = True
            elif entry:
                if entry.sample_backlog:
                    entry.row["backlog_files"], entry.row["backlog_age_seconds"] = self._backlog()
                self._buffer.append(entry.row)
                if self._first_buffered is None:
                    self._first_buffered = time.monotonic()
                if not self._queue.empty():
                    continue  # take everything that waits before deciding to flush
            due = self._first_buffered is not None and (
                closing or time.monotonic() - self._first_buffered >= self.settings.flush_seconds)
            if due:
                self._flush()
        if self._buffer:
            self._flush()
        self.stats["thread_cpu_seconds"] = time.thread_time()

    def _backlog(self) -> tuple[int | None, float | None]:
        """Input files waiting now, as ``checkpoint inspect`` counts them, and how long the oldest has waited (a job
        that discovers its files; None for what it cannot tell)."""
        import dataclasses

        from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

        started = time.perf_counter()
        try:
            report = inspect_checkpoint(dataclasses.replace(self.job, name=self.stream), str(self.lake_root),
                                        input_path=self.input_path)
            return report.backlog_files, (report.discovery or {}).get("oldest_waiting_age_seconds")
        except Exception as error:  # noqa: BLE001 - a sample is worth less than the driver
            log.warning("progress history of %s: no backlog sample: %s", self.stream, error)
            return None, None
        finally:
            self.stats["sample_seconds"] += time.perf_counter() - started

    def _flush(self) -> None:
        rows = self._buffer
        started = time.perf_counter()
        try:
            append_rows(self.lake_root, rows)
            self.stats["append_seconds"] += time.perf_counter() - started
        except Exception as error:  # noqa: BLE001 - history must never stop the job; keep the rows, retry later
            log.warning("progress history of %s: could not append %d rows to %s: %s", self.stream, len(rows),
                        progress_table_path(self.lake_root), error)
            if len(rows) > MAX_BUFFERED_ROWS:
                del rows[: len(rows) - MAX_BUFFERED_ROWS]
            self._first_buffered = time.monotonic()
            return
        self.stats["rows"] += len(rows)
        self.stats["appends"] += 1
        self._buffer = []
        self._first_buffered = None
        self._maintain()

    def _maintain(self) -> None:
        now = time.monotonic()
        try:
            if self._maintained_at is None or now - self._maintained_at >= MAINTENANCE_EVERY_SECONDS:
                self._maintained_at = now
                apply_retention(self.lake_root, self.settings.retention_days)
            if self.stats["appends"] % max(1, self.settings.compact_every_commits) == 0:
                compact(self.lake_root)
        except Exception as error:  # noqa: BLE001 - e.g. a commit race with another driver's recorder
            log.info("progress history maintenance skipped this time: %s", error)
