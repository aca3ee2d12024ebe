"""The reconcile: list a landing's whole history at an interval and ingest, exactly once, what discovery missed.

Discovery lists only each stem's window, so a file delivered with a time already behind its stem's cut (a
delivery hours late, a copy of an old file into a known folder) is never listed by the stream. Databricks' Auto
Loader has ``backfillInterval`` for this; here a reconcile (``python -m spark_jobs reconcile JOB``, and the daily
DAG ``<job>_reconcile``) does it:

1. one full walk of the landing (every stem whole; :func:`spark_jobs.control.discovery.listing.walk`);
2. files the live stream still looks for (seen in its window, or at or after their stem's cut) are its own;
   files delivered before the stream's declared start (``run --start-at``, kept in its window as the floor)
   are left out and counted: what came before the start enters only by an explicit backfill;
3. of the rest, the files the job's tables already hold rows of (their ``source_file`` columns, read with
   delta-rs and DuckDB, no JVM) were ingested;
4. what is left was missed: written as a file list and ingested by an available-now run of the job as its
   own writer, ``<job>@reconcile`` (checkpoint ``<lake>/checkpoints/<job>@reconcile``), so beside the live
   stream it adds each file's rows exactly once (Delta's idempotent writes per writer, the tables' unique keys).

The report (listed, the live window's, already ingested, before the start, missed) is written to ``<lake>/control/<job>/
reconcile.json``: ``checkpoint inspect`` and the health page show the last one. A file that gives no row at all
(a ``{"Records": []}`` delivery) is found "missed" again at each reconcile and read again, adding nothing; the
report counts such files. Zero-byte files are skipped: they give no row. No pyspark: the run itself is the driver's (:mod:`spark_jobs.cli.reconcile`).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field

from spark_jobs.control.checkpoint.store import Location
from spark_jobs.control.discovery.listing import Candidate, walk
from spark_jobs.control.discovery.settings import DiscoverySettings
from spark_jobs.control.discovery.state import DiscoveryLog, Window
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake

WRITER = "reconcile"
REPORT = "reconcile.json"
UTC = dt.timezone.utc


@dataclass
class ReconcilePlan:
    """What a reconcile found.

    :param listed: files in the landing (the full walk).
    :param live: files the live stream still looks for (its window's).
    :param ingested: files the tables already hold rows of.
    :param missed: files neither: they are ingested by the reconcile's run.
    :param listing: what the full walk cost.
    :param before_start: files delivered before the stream's declared start: left to a backfill.
    :param start_at: that start (ISO-8601), if one was declared.
    """

    listed: int
    live: int
    ingested: int
    missed: list[Candidate] = field(default_factory=list)
    listing: dict = field(default_factory=dict)
    before_start: int = 0
    start_at: str | None = None

    def summary(self, shown: int = 20) -> dict:
        return {"listed": self.listed, "live_window": self.live, "already_ingested": self.ingested,
                "before_start": self.before_start, "start_at": self.start_at,
                "missed": len(self.missed), "first_missed": [f.key for f in self.missed[:shown]],
                "listing": self.listing}


def ingested_files(job: JobSpec, lake: Lake) -> set[str]:
    """Every input file the job's tables hold a row of (their ``source_file`` columns), read without Spark."""
    import duckdb
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from spark_jobs.model.object_store import delta_rs_options

    found: set[str] = set()
    for table in job.tables:
        if not table.source_file:
            continue
        path = lake.table_path(table.name)
        try:
            dataset = DeltaTable(str(path), storage_options=delta_rs_options(path)).to_pyarrow_dataset()
        except TableNotFoundError:
            continue
        column = table.source_file
        with duckdb.connect() as connection:
            connection.register("t", dataset)
            found.update(r[0] for r in connection.execute(f'SELECT DISTINCT "{column}" FROM t').fetchall()
                         if r[0] is not None)
    return found


def plan(job: JobSpec, lake: Lake, live: DiscoverySettings, since: dt.datetime | None = None) -> ReconcilePlan:
    """Find what the live stream of ``live`` (its landing and checkpoint) missed.

    :param since: only files delivered at or after this (default: the whole history).
    """
    layout = live.layout
    log = DiscoveryLog(Location.of(live.checkpoint))
    window = log.window(layout) if log.exists() else Window()
    found = walk(live.root, layout, live.glob, since=since)
    behind, before_start = [], 0
    for candidate in found.files:
        if window.floor_ms is not None and candidate.delivered_ms < window.floor_ms:
            before_start += 1  # before the declared start: only an explicit backfill loads it
            continue
        cut = window.cut_of(layout.stem(candidate.key))
        if candidate.key in window.seen or cut is None or candidate.delivered_ms >= cut or candidate.size == 0:
            continue  # the stream's own, or nothing to ingest (a zero-byte file gives no row)
        behind.append(candidate)
    held = ingested_files(job, lake) if behind else set()
    missed = sorted((c for c in behind if c.key not in held), key=lambda c: (c.delivered_ms, c.key))
    start = None if window.floor_ms is None else \
        dt.datetime.fromtimestamp(window.floor_ms / 1000, UTC).isoformat(timespec="seconds")
    return ReconcilePlan(len(found.files), len(found.files) - len(behind) - before_start, len(behind) - len(missed),
                         missed, found.stats(), before_start, start)


def write_file_list(lake: Lake, job: JobSpec, files: list[Candidate], now: dt.datetime) -> str:
    """The missed files as the file list the reconcile's run reads (beside its checkpoint, one per run)."""
    target = Location.of(str(lake.control_path(f"{job.name}@{WRITER}"))).child(f"files-{now:%Y%m%dT%H%M%S}.json")
    target.write_bytes(json.dumps([f.row() for f in files]).encode())
    return target.url


def write_report(lake: Lake, job: JobSpec, report: dict) -> None:
    Location.of(str(lake.control_path(job.name))).child(REPORT).write_bytes(json.dumps(report, sort_keys=True).encode())


def last_report(lake_root, job: str) -> dict | None:
    """The last reconcile's report of ``job`` (``None`` if it never ran)."""
    try:
        return json.loads(Location.of(str(Lake.at(lake_root).control_path(job))).child(REPORT).read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def report_of(result: ReconcilePlan, started: float, now: dt.datetime, run: dict | None) -> dict:
    return {"at": now.astimezone(UTC).isoformat(timespec="seconds"), **result.summary(),
            "seconds": round(time.monotonic() - started, 2), "run": run}
