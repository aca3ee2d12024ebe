"""Reprocess a job's input from a delivery time onwards: ``python -m spark_jobs reprocess JOB --from-time T``.

Usage (the on-call DAG's ``reprocess_from`` spark-submits exactly this)::

    python -m spark_jobs reprocess cloudtrail_etl --from-time 2024-03-02T00:00:00Z [--input DIR] [--lake L]
                                   [--dry-run] [--audit-id UUID]

**What it replays.** The files of the job's input folder *delivered* at or after ``T``, by the job's key
layout (:class:`~spark_jobs.model.layout.KeyLayout`: CloudTrail's object name ``..._20240302T0805Z_...``, else
its ``YYYY/MM/DD`` folders; Cowrie's ``cowrie.json.YYYY-MM-DD``), the rule of the backfills; not the
modification time, which copies and restores change. A file whose key carries none is not replayed. Only the
date folders from ``T`` on are listed.

**What it leaves.** The tables exactly as if every input file had been processed once by the current
code: one row per eventID, nothing missing. They are parsed in one batch by the job's own
``transform`` (the code the stream runs), and each table is then rebuilt in **one Delta commit**:

1. the partitions involved are those holding rows of the replayed files now, those the replay's rows
   go to, and those whose files the Delta log lists but the disk no longer has (a damaged table);
2. their new contents: the rows of *other* files, kept as they are, plus the replay's rows (the first
   delivery of an event within the replay; an event some kept row already holds is not added again);
3. written with ``replaceWhere`` on those partitions: the one commit removes every file of them (the
   missing ones too) and adds the new files, so a reader sees the old rows or the new ones, never a
   mix and never a gap. The commit carries ``userMetadata`` naming the audit id.

So rows of the replayed files that the current code no longer produces are gone (a bad deploy's rows
are replaced, not duplicated), a damaged partition gets its rows back, and rows of files delivered
before ``T`` stay. Quarantine rows of the replayed files are replaced the same way and get today's
``ingest_date``. A damaged partition that the replay cannot fill back (it would hold fewer rows than
its Delta log says it had: those rows came from files delivered before ``T``) is refused before
anything is written. A commit that loses a race to the live job (the same partitions) is redone
from a fresh read; the live job's own MERGE retries the same way, so both stay exact.

Why not a streaming replay with its own checkpoint (like a backfill)? It would commit per micro-batch
(a reader would see a half-restored table), and its insert-only MERGE can neither replace a bad
deploy's rows nor drop the log's references to deleted files.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.times import utc_iso
from spark_jobs.driver.session import session_conf
from spark_jobs.control.oncall.requests import ReplayPlan, add_actions, missing_files
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
from spark_jobs.driver.source_readers import read_file_list
from spark_jobs.driver.write.rows import table_rows
from spark_jobs.driver.write.delta_writer import (RetryPolicy, TableTarget, commit_retrying, create_tables,
                                                  first_of_each_key, sql_literal)

log = logging.getLogger("spark_jobs")

IGNORE_MISSING_FILES = "spark.sql.files.ignoreMissingFiles"
REPLAYED = "_replayed_file"


class ReprocessRefused(UsageError):
    """The rebuild would lose rows; nothing was written."""


def damaged_partitions(lake: Lake, target: TableTarget) -> dict:
    """Partition value (as text) -> rows the Delta log says it holds, for each partition with files missing on disk."""
    missing = missing_files(lake, target.name)
    if not missing:
        return {}
    column = target.partition_by[0]
    rows: dict = {}
    for action in add_actions(target.path):
        value = action.get(f"partition.{column}")
        if f"{column}={value}" in missing:
            rows[value] = rows.get(value, 0) + int(action.get("num_records") or 0)
    return rows


def reprocess(spark: SparkSession, job: JobSpec, lake: Lake, source: Path, from_time: datetime,
              audit_id: str | None = None, retry: RetryPolicy | None = None) -> dict:
    """Replay ``source``'s files delivered at or after ``from_time`` into ``job``'s tables (see the module doc).

    :returns: the files replayed and, per table, the partitions rebuilt, rows before and after, the version.
    :raises UsageError: no file to replay.
    :raises ReprocessRefused: a damaged partition would be left with fewer rows than it held.
    """
    started = time.monotonic()
    plan = ReplayPlan.of(job, lake, source, from_time)
    if not plan.listing.files:
        raise UsageError(f"no input file in {source} was delivered at or after {utc_iso(from_time)}: nothing to replay")
    module = job_module(job)
    targets = table_targets(job, lake)
    create_tables(spark, targets, lambda: output_schemas(spark, job))
    files = read_file_list(spark, [_as_read(path) for path in plan.listing.files])
    replayed = files.select(F.col("path").alias(REPLAYED)).distinct().persist()
    count = replayed.count()
    log.info("reprocess %s: replaying %d files delivered at or after %s", job.name, count, utc_iso(from_time))
    parsed = module.transform(files, job).persist(StorageLevel.MEMORY_AND_DISK)
    note = f"streaming_oncall reprocess_from {utc_iso(from_time)}" + (f" audit {audit_id}" if audit_id else "")
    results = {}
    try:
        for target in targets:
            rows = table_rows(module, target, parsed)
            if target.first_by:
                rows = first_of_each_key(target, rows)
            # Evaluated once: the rows (and quarantine's ingest_date) are the same in every read below.
            rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
            rows.count()
            try:
                results[target.name] = rebuild(spark, lake, target, rows, replayed,
                                               job.table(target.name).source_file, note, retry or RetryPolicy())
            finally:
                rows.unpersist()
    finally:
        parsed.unpersist()
        replayed.unpersist()
    return {"job": job.name, "from_time": utc_iso(from_time), "files": count, "source": str(source),
            "tables": results, "seconds": round(time.monotonic() - started, 1)}


def rebuild(spark: SparkSession, lake: Lake, target: TableTarget, replay: DataFrame, replayed: DataFrame,
            source_column: str, note: str, retry: RetryPolicy) -> dict:
    """Rebuild the partitions of ``target`` that the replay touches, in one Delta commit (retried on conflicts)."""
    from deltalake import DeltaTable

    if len(target.partition_by) != 1:
        raise UsageError(f"table {target.name}: reprocess rebuilds tables partitioned by one column, not "
                         f"{target.partition_by}")
    part = target.partition_by[0]
    path = str(target.path)
    damaged = damaged_partitions(lake, target)

    def attempt() -> dict:
        """One read of the table and one commit; redone from a fresh read after a commit conflict."""
        version_before = DeltaTable(path, storage_options=delta_rs_options(path)).version()
        table = spark.read.format("delta").load(path)
        of_replayed = table.join(F.broadcast(replayed), table[source_column] == replayed[REPLAYED], "left_semi")
        # Partition values as text: Spark casts them back for the filter and the predicate.
        values = {r[0] for frame in (of_replayed, replay) for r in frame.select(part).distinct().collect()}
        if None in values:
            raise UsageError(f"table {target.name}: rows with a NULL {part} cannot be rebuilt by partition")
        affected = sorted({str(v) for v in values} | set(damaged))
        if not affected:
            return {"partitions": [], "version_before": version_before, "version": version_before}
        inside = table.where(F.col(part).isin(affected))
        kept = inside.join(F.broadcast(replayed), inside[source_column] == replayed[REPLAYED], "left_anti")
        new = replay
        if target.unique_key:
            keys = kept.select(*target.unique_key)
            condition = [replay[c].eqNullSafe(keys[c]) for c in target.unique_key]
            new = replay.join(keys, condition, "left_anti")
        result = kept.unionByName(new.select(*table.columns))
        counts = {str(r[0]): r[1] for r in result.groupBy(part).count().collect()}
        short = {value: (counts.get(value, 0), held) for value, held in damaged.items()
                 if counts.get(value, 0) < held}
        if short:
            value, (now, held) = sorted(short.items())[0]
            raise ReprocessRefused(
                f"table {target.name}: partition {part}={value} has files missing on disk and held {held} rows; "
                f"the replay gives it only {now}: the other rows came from files delivered before the replay's "
                "time. Nothing was written; reprocess from an earlier time")
        predicate = f"`{part}` IN ({', '.join(sql_literal(v) for v in affected)})"
        (result.write.format("delta").mode("overwrite").option("replaceWhere", predicate)
         .option("userMetadata", note).save(path))
        commit = DeltaTable(path, storage_options=delta_rs_options(path)).history(1)[0]
        metrics = commit.get("operationMetrics") or {}
        summary = {"partitions": affected, "damaged_partitions": sorted(damaged),
                   "rows_after": int(sum(counts.values())), "rows_removed": _int(metrics.get("numDeletedRows")),
                   "rows_written": _int(metrics.get("numOutputRows")), "files_removed":
                   _int(metrics.get("numRemovedFiles")), "version_before": version_before,
                   "version": commit.get("version")}
        log.info("reprocess, table %s: %s", target.name, json.dumps(summary, default=str))
        return summary

    # The table's files deleted by hand are skipped when reading it (their rows come from the replay).
    with session_conf(spark, {IGNORE_MISSING_FILES: "true"}):
        return commit_retrying(attempt, retry, f"reprocess, table {target.name}")


def _as_read(path: str) -> str:
    """A listed file as Spark reads and names it (``file:/...`` for a local path)."""
    return path if "://" in path else f"file:{path}"


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
