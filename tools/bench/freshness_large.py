"""Freshness on a large table, from the query's (re)start, seen by a delta-rs reader and a Spark reader.

``bench --only freshness`` measures a warmed-up job on an empty lake with one Spark reader. This part
(issue 27, goal 2) asks what a user of a large table sees:

- The job (``python -m spark_jobs run cloudtrail_etl --trigger processing-time:1s``, its own process and
  JVM, as people run it) starts on a lake whose ``cloudtrail_events`` already holds ``size`` events (10
  million by default) in today's partition: the table :func:`tools.bench.merge_cost.build_table` builds
  (cached under ``.spark/bench/live_tables/``, files of 250,000 events each a stretch of event time, as
  ``lake optimize`` leaves them), hard-linked into the run's lake (Delta never rewrites a file in place).
- Nothing warms it up: files land ``gap_s`` apart on a fixed clock from the moment the job logs that its
  query started. The files that land in the first ``first_minute_s`` seconds are reported apart from
  the rest (the goal for them is p95 <= 4 s; for the rest p50 <= 1.5 s, p95 <= 2.5 s).
- Two readers poll the table at once, each in its own thread: a Spark reader (the benchmark's session,
  reading the Delta log as ``python -m spark_jobs sql`` does; :class:`tools.bench.freshness.TableWatcher`)
  and a delta-rs reader (``deltalake.DeltaTable.update_incremental``, then the new files' ``_source_file``
  column with pyarrow, as a DuckDB or pandas user would). A file's latency for a reader is from its
  landing (``os.replace``) to the end of the reader's first poll that showed it. Both readers skip the
  base table's files (they hold none of the landed files' events).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from tools.bench.data import RecordSource
from tools.bench.freshness import JOB, TRIGGER, FreshnessRun, JobProcess, TableWatcher, _batch_ms
from tools.bench.merge_cost import TABLE, build_table
from tools.bench.probes import percentile
from spark_jobs.model.lake import Lake

log = logging.getLogger("tools.bench")
POLL_PAUSE_S = 0.1
VISIBLE_TIMEOUT_S = 300.0
GOALS = {"steady": {"p50_s": 1.5, "p95_s": 2.5}, "first_minute": {"p95_s": 4.0}}


def file_name(path: str) -> str:
    """The file name of a path or URL (what a landed file is known by)."""
    return path.rsplit("/", 1)[-1]


class DeltaRsWatcher:
    """What a delta-rs reader of a table sees, cheaply enough to ask every 0.1 s: the values of one column in the data
    files committed since its last look (by default the input files' names, the same interface as
    :class:`TableWatcher`).

    :param table: the table folder (it may have no commit yet: nothing is visible then).
    :param column: the column read from each new data file.
    :param field: the field of ``column``'s struct holding the value; None: the column's own value.
    :param key: what is kept of each value (default: a path's file name).
    """

    def __init__(self, table: Path, column: str = "_source_file", field: str | None = None,
                 key: Callable[[str], str] = file_name):
        self.table, self.column, self.field, self.key = table, column, field, key
        self._dt = None
        self._files: frozenset[str] = frozenset()
        self.visible: set[str] = set()
        self.queries = 0

    def _current(self) -> frozenset[str]:
        import deltalake
        from deltalake.exceptions import TableNotFoundError

        if self._dt is None:
            try:
                self._dt = deltalake.DeltaTable(str(self.table))
            except TableNotFoundError:  # no commit yet
                return frozenset()
        else:
            self._dt.update_incremental()
        return frozenset(uri.removeprefix("file://") for uri in self._dt.file_uris())

    def prime(self) -> None:
        """Take the table's present files as seen (the base table's: none of the landed files' events)."""
        self._files = self._current()

    def poll(self) -> set[str]:
        import pyarrow.parquet as pq

        files = self._current()
        new = sorted(files - self._files)
        if new:
            for path in new:
                values = pq.read_table(path, columns=[self.column]).column(self.column).combine_chunks()
                if self.field is not None:
                    values = values.field(self.field)
                self.visible |= {self.key(value) for value in values.unique().to_pylist() if value}
            self.queries += 1
        self._files = files
        return self.visible


class Poller(threading.Thread):
    """A reader's thread: :meth:`poll_once` every :data:`POLL_PAUSE_S` until ``halt`` is set; it counts its polls
    and keeps the error that ended it (the measurement reports it)."""

    def __init__(self, name: str):
        super().__init__(name=name, daemon=True)
        self.polls = 0
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def poll_once(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                self.poll_once()
                self.polls += 1
                self.halt.wait(POLL_PAUSE_S)
        except BaseException as exc:  # noqa: BLE001 - reported by the measurement
            self.error = exc


class _ReaderThread(Poller):
    """Polls one watcher until stopped; records when each landed file was first seen."""

    def __init__(self, name: str, watcher, landed: dict[str, float]):
        super().__init__(f"reader-{name}")
        self.watcher, self.landed = watcher, landed
        self.latencies: dict[str, float] = {}

    def poll_once(self) -> None:
        visible = self.watcher.poll()
        seen_at = time.monotonic()
        for name in visible - self.latencies.keys():
            if name in self.landed:
                self.latencies[name] = round(seen_at - self.landed[name], 3)


def _link_table(base: Path, lake: Lake) -> None:
    """The base's events table in ``lake``, its files hard links (the base is never written)."""
    shutil.rmtree(lake.root, ignore_errors=True)
    target = lake.table_path(TABLE)
    target.parent.mkdir(parents=True)
    shutil.copytree(Lake(base).table_path(TABLE), target, copy_function=os.link)


def _stats(values: list[float]) -> dict:
    return {"files": len(values), "p50_s": percentile(values, 50) if values else None,
            "p95_s": percentile(values, 95) if values else None, "max_s": max(values) if values else None}


def measure_freshness_large(spark: SparkSession, run_dir: Path, source: RecordSource, size: int = 10_000_000,
                            files: int = 50, gap_s: float = 3.0, first_minute_s: float = 60.0,
                            records_per_file: int = 1000, seed: int = 27) -> dict:
    """Measure as the module docstring says; returns the report section."""
    from spark_jobs.driver.job_modules import output_schemas

    today = dt.datetime.now(dt.UTC).date()
    built = time.monotonic()
    base = build_table(spark, size, 1, last_day=today)
    build_s = round(time.monotonic() - built, 1)
    root = run_dir / "freshness_large"
    lake = Lake(root / "lake")
    _link_table(base, lake)
    landing = root / "landing"
    shutil.rmtree(landing, ignore_errors=True)
    landing.mkdir(parents=True)
    table = lake.table_path(TABLE)
    spark_watcher = TableWatcher(spark, table, output_schemas(spark, JOB)[TABLE])
    rs_watcher = DeltaRsWatcher(table)
    spark_watcher.prime()
    rs_watcher.prime()

    launched = time.monotonic()
    job = JobProcess(["run", JOB.name, "--input", str(landing), "--lake", str(lake.root), "--trigger", TRIGGER])
    run = FreshnessRun(job, landing, lake, source, records_per_file, random.Random(seed))
    readers = {"spark": _ReaderThread("spark", spark_watcher, run.landed),
               "delta_rs": _ReaderThread("delta_rs", rs_watcher, run.landed)}
    order: list[str] = []
    try:
        job.wait_for("started", timeout=VISIBLE_TIMEOUT_S)
        started = time.monotonic()
        for reader in readers.values():
            reader.start()
        for index in range(files):  # on a fixed clock: file k lands gap_s * k after the query started
            time.sleep(max(0.0, started + gap_s * index - time.monotonic()))
            job.check_alive()
            order.append(run.land())
        deadline = time.monotonic() + VISIBLE_TIMEOUT_S
        while time.monotonic() < deadline and not all(set(order) <= r.latencies.keys() for r in readers.values()):
            job.check_alive()
            for name, reader in readers.items():
                if reader.error:
                    raise RuntimeError(f"the {name} reader failed: {reader.error!r}")
            time.sleep(0.2)
    finally:
        for reader in readers.values():
            reader.halt.set()
        for reader in readers.values():
            if reader.is_alive():
                reader.join(timeout=30)
        summary = job.stop()
    first = {name for name in order if run.landed[name] - started < first_minute_s}
    by_reader = {}
    for name, reader in readers.items():
        missing = [f for f in order if f not in reader.latencies]
        if missing:
            raise TimeoutError(f"{len(missing)} files never became visible to the {name} reader")
        steady = _stats([reader.latencies[f] for f in order if f not in first])
        opening = _stats([reader.latencies[f] for f in order if f in first])
        by_reader[name] = {
            "first_minute": {**opening, "goal": "p95 <= 4 s", "met": opening["p95_s"] <= GOALS["first_minute"]["p95_s"]},
            "after_first_minute": {**steady, "goal": "p50 <= 1.5 s, p95 <= 2.5 s",
                                   "met": steady["p50_s"] <= GOALS["steady"]["p50_s"]
                                   and steady["p95_s"] <= GOALS["steady"]["p95_s"]},
            "latencies_s": [reader.latencies[f] for f in order],
            "polls": reader.polls,
            "poll_period_s": round((time.monotonic() - started) / max(1, reader.polls), 3),
        }
    batches = [line.split("INFO spark_jobs: ", 1)[-1] for line in job.lines if "INFO spark_jobs: batch" in line]
    return {
        "what": f"file landed (os.replace) -> its events visible to a Spark reader and to a delta-rs reader, "
                f"each polling the table; job: python -m spark_jobs run {JOB.name} --trigger {TRIGGER}, started on "
                f"a table of {size:,} events in today's partition, no warm-up",
        "table_events": size,
        "table_build_s": build_s,
        "files": files, "records_per_file": records_per_file, "gap_s": gap_s, "first_minute_s": first_minute_s,
        "job_start_to_query_started_s": round(started - launched, 1),
        "readers": by_reader,
        "job_batches_ms": [_batch_ms(b) for b in batches],
        "job_batches": batches,
        "job_summary": summary.strip().splitlines()[-1] if summary.strip() else None,
        "met": all(r["first_minute"]["met"] and r["after_first_minute"]["met"] for r in by_reader.values()),
    }
