"""Maintenance and recovery of the lake's Delta tables: ``python -m spark_jobs lake ...``.

Usage::

    python -m spark_jobs lake history  [--table T] [--limit 20] [--format table|json]
    python -m spark_jobs lake optimize [--table T] [--where "date >= '2024-03-01'"] [--zorder-by COL,...|none]
                                       [--changed-only]
    python -m spark_jobs lake vacuum   [--table T] [--retention-hours H] [--dry-run] [--force]
    python -m spark_jobs lake restore  --table T (--to-version N | --to-timestamp TIME) [--yes]
    python -m spark_jobs lake convert  [--table T]

Without ``--table`` a command acts on every table of the registry, one after the other. Each prints
one JSON line per table (``history``: a table, or JSON lines with ``--format json``). ``history``
and the check of ``restore`` read the log with delta-rs (no JVM); the others are Delta transactions
run by delta-spark (``build_session``; under spark-submit its master and conf).

While a job writes the table:

- ``optimize`` is one Delta transaction per batch of rewritten files (``dataChange=false``):
  readers keep reading the version they started on, appends never conflict with it, and a MERGE that
  read a file compaction replaced fails its commit and is retried by the job's writer.
- ``vacuum`` deletes only files that no version younger than the retention needs and that are not
  in the log at all (left by a killed batch) and older than the retention; an uncommitted write is
  younger than that, which is what Delta's retention safety check protects. Below the table's
  ``delta.deletedFileRetentionDuration`` it is refused unless ``--force``.
- ``restore`` is one transaction (the running job's later commits are kept), but it removes rows
  the job's checkpoint has already marked as written: they are not ingested again.
- ``convert`` is not: it reads the file sink's ``_spark_metadata`` log once; stop the previous
  version's job first (the current job refuses to start on a table in the old layout).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
from pathlib import Path

from spark_jobs.control.lake.delta_log import (RestorePlan, commit_infos, delta_path, int_or_none, latest_version,
                                                partitions_with_small_files, version_rows)
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.tables import TableSpec
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.registry import JOBS, all_tables

COMMANDS = ("history", "optimize", "vacuum", "restore", "convert")
OPTIMIZE_ATTEMPTS = 3
# Z-ordered by a table's delivery-time-bound column, a day's partition is cut into files of at most this
# size, each a stretch of time (Delta's default, 1 GB, would leave one file spanning the day, which every
# live MERGE of that day would read): the pipelined pass's MERGE then reads one or two of them.
OPTIMIZE_MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"
TIME_ORDERED_FILE_BYTES = 64 * 1024 * 1024
log = logging.getLogger("spark_jobs")
# Delta's own default of delta.deletedFileRetentionDuration ("interval 1 week").
DELTA_DEFAULT_RETENTION_HOURS = 168.0
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
CONVERT_USES_METADATA_LOG_CONF = "spark.databricks.delta.convert.useMetadataLog"
# VACUUM lists the table's folders with this many tasks; Spark's default (10,000) costs minutes on a
# small machine for a small table.
LISTING_PARALLELISM_CONF = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
# VACUUM START / VACUUM END commits in the history, with the number of files deleted.
VACUUM_LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"


# --- tables ----------------------------------------------------------------------------------------

def registry_table(name: str) -> tuple[JobSpec, TableSpec]:
    """The registry's table called ``name`` and its job.

    :raises UsageError: naming the unknown table and the known ones.
    """
    for job in JOBS.values():
        for table in job.tables:
            if table.name == name:
                return job, table
    known = list(all_tables())
    raise UsageError(f"unknown table {name!r}; tables: {', '.join(known)}")


def chosen_tables(name: str | None) -> list[tuple[JobSpec, TableSpec]]:
    """``name``'s table, or every registry table when ``name`` is None."""
    if name:
        return [registry_table(name)]
    return list(all_tables().values())  # a table several jobs write, once (with its owner)


CONVERT_COMMAND = "python -m spark_jobs lake convert"


def is_old_layout(path: Path) -> bool:
    """Whether a table folder is in the previous version's layout: Spark's file sink (``_spark_metadata``), not Delta."""
    return (path / "_spark_metadata").is_dir() and not (path / "_delta_log").is_dir()


def refuse_old_layout(lake: Lake, tables: list[str]) -> None:
    """The check a driver makes before it starts: no table of its job is in the old file-sink layout.

    :raises UsageError: naming the first such table and the command that converts the lake.
    """
    for table in tables:
        path = lake.table_path(table)
        if is_old_layout(path):
            raise UsageError(f"table {table} at {path} is in the old file-sink layout (_spark_metadata, no _delta_log); "
                             f"convert the lake to Delta first: {CONVERT_COMMAND}")


# --- history ---------------------------------------------------------------------------------------


def print_history(entries: list[dict], output_format: str, out=sys.stdout) -> None:
    if output_format == "json":
        for entry in entries:
            print(json.dumps(entry, sort_keys=False), file=out)
        return
    columns = ("table", "version", "time", "operation", "rows_added", "rows_removed", "files_added", "files_removed")
    cells = [[("" if e[c] is None else str(e[c])) for c in columns] for e in entries]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)


# --- optimize --------------------------------------------------------------------------------------

def optimize(spark, lake: Lake, table: TableSpec, where: str | None = None,
             zorder_by: tuple[str, ...] | None = None, time_ordered_file_bytes: int = TIME_ORDERED_FILE_BYTES,
             changed_only: bool = False) -> dict:
    """Compact the table's small files (and Z-order them by ``zorder_by``; None: the registry's).

    Z-ordered by the table's ``delivery_time_bound`` column alone (``cloudtrail_events``: ``eventTime``), the
    files are at most ``time_ordered_file_bytes`` each, so each holds a short stretch of time and a live
    batch's MERGE, bounded by its files' delivery times, skips the others
    (:mod:`spark_jobs.driver.write.pipelined`).

    :param where: a predicate on partition columns: only those partitions are compacted.
    :param changed_only: only the partitions holding two or more files under half of
        ``time_ordered_file_bytes`` (those appends wrote since the last optimize; see
        :func:`spark_jobs.control.lake.delta_log.partitions_with_small_files`), ANDed with ``where``. Delta's
        Z-order rewrites every file of the partitions it is given, so without this a daily run rewrites
        the whole table; with it, the day the live job appends to and any day a backfill wrote.
        An unpartitioned table counts as one partition.
    :returns: files removed and added, partitions touched and the version the compaction created
        (the same version as before when there was nothing to compact).
    """
    from delta.tables import DeltaTable

    from spark_jobs.driver.session import session_conf
    from spark_jobs.driver.write.delta_writer import RetryPolicy, commit_retrying

    path = delta_path(lake, table.name)
    columns = table.zorder_by if zorder_by is None else zorder_by
    partitions = None
    if changed_only:
        partitions, where = _changed_partitions(path, table, where, time_ordered_file_bytes // 2)
    before = latest_version(path)
    result = []
    if partitions != []:  # [] with --changed-only: no partition was appended to since the last optimize
        builder = DeltaTable.forPath(spark, str(path)).optimize()
        if where:
            builder = builder.where(where)

        def compact() -> list:
            with session_conf(spark, _layout_conf(table, columns, time_ordered_file_bytes)):
                return (builder.executeZOrderBy(*columns) if columns else builder.executeCompaction()).collect()

        # a commit that lost a race to a writer is redone at once (the writer's retries back off)
        result = commit_retrying(compact, RetryPolicy(attempts=OPTIMIZE_ATTEMPTS, first_delay=0),
                                 f"optimize of {table.name}")
    metrics = result[0].metrics if result else None
    return {
        "table": table.name,
        "command": "optimize",
        "zorder_by": list(columns),
        "where": where,
        **({"changed_partitions": partitions} if partitions is not None else {}),
        "files_removed": metrics.numFilesRemoved if metrics else 0,
        "files_added": metrics.numFilesAdded if metrics else 0,
        "partitions_optimized": metrics.partitionsOptimized if metrics else 0,
        "version_before": before,
        "version": latest_version(path),
    }


def _changed_partitions(path: Path, table: TableSpec, where: str | None, below_bytes: int) -> tuple[list[str], str | None]:
    """``optimize --changed-only``: the partitions with two or more files under ``below_bytes``, and ``where``
    narrowed to them (unchanged for an unpartitioned table, which counts as one partition).

    :raises UsageError: for a table partitioned by more than one column.
    """
    if len(table.partition_by) > 1:
        raise UsageError(f"--changed-only needs a table partitioned by one column at most; {table.name} is "
                         f"partitioned by {list(table.partition_by)}: leave --changed-only out")
    column = table.partition_by[0] if table.partition_by else None
    partitions = partitions_with_small_files(path, column, below_bytes)
    if column and partitions:
        chosen = f"{column} IN ({', '.join(repr(p) for p in partitions)})"
        where = f"({where}) AND {chosen}" if where else chosen
    return partitions, where


def _layout_conf(table: TableSpec, columns: tuple[str, ...], file_bytes: int) -> dict[str, str]:
    """The session settings of an ``optimize`` of ``table`` Z-ordered by ``columns``: a file size cap when
    that is the table's delivery-time-bound column alone (see :func:`optimize`)."""
    timed = table.delivery_time_bound
    return {OPTIMIZE_MAX_FILE_SIZE_CONF: str(file_bytes)} if timed and tuple(columns) == (timed.column,) else {}


# --- vacuum ----------------------------------------------------------------------------------------

def _interval_hours(text: str | None) -> float | None:
    """Hours in a Delta interval property like ``interval 7 days`` / ``interval 168 hours``."""
    if not text:
        return None
    units = {"week": 168.0, "day": 24.0, "hour": 1.0, "minute": 1 / 60, "second": 1 / 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(week|day|hour|minute|second)s?", text.lower()):
        total += float(number) * units[unit]
    return total or None


def safety_minimum_hours(path: Path) -> float:
    """The retention Delta's safety check requires: the table's ``delta.deletedFileRetentionDuration``."""
    from deltalake import DeltaTable

    metadata = DeltaTable(str(path), storage_options=delta_rs_options(path)).metadata()
    configured = metadata.configuration.get("delta.deletedFileRetentionDuration")
    return _interval_hours(configured) or DELTA_DEFAULT_RETENTION_HOURS


def check_retention(table: str, retention_hours: float, minimum_hours: float, force: bool) -> None:
    """Refuse a retention below Delta's safety minimum unless ``force``.

    :raises UsageError: naming the retention, the minimum and what ``--force`` would risk.
    """
    if retention_hours < 0:
        raise UsageError(f"--retention-hours must be >= 0, got {retention_hours:g}")
    if retention_hours < minimum_hours and not force:
        raise UsageError(
            f"vacuum of {table} with a retention of {retention_hours:g} hours is below Delta's safety minimum of "
            f"{minimum_hours:g} hours (the table's delta.deletedFileRetentionDuration): it could delete files a "
            "running job is about to commit, that a query is reading, or that time travel to a version younger "
            f"than {minimum_hours:g} hours needs. Use --retention-hours {minimum_hours:g} or more, or pass --force "
            "when no job writes this table and nobody reads older versions")


def vacuum(spark, lake: Lake, table: TableSpec, retention_hours: float | None = None, force: bool = False,
           dry_run: bool = False) -> dict:
    """Delete files that no version within ``retention_hours`` (None: the registry's) needs.

    :param force: allow a retention below the safety minimum (disables Delta's check for this call).
    :param dry_run: only count the files that would be deleted (a DRY RUN lists the table once).
    :returns: the retention used, the files deleted (from the ``VACUUM END`` commit's metrics) or
        that would be, and the version afterwards.
    """
    path = delta_path(lake, table.name)
    hours = float(table.vacuum_retention_hours if retention_hours is None else retention_hours)
    minimum = safety_minimum_hours(path)
    check_retention(table.name, hours, minimum, force)
    settings = {LISTING_PARALLELISM_CONF: str(max(8, 4 * spark.sparkContext.defaultParallelism)),
                VACUUM_LOGGING_CONF: "true"}
    if hours < minimum:
        settings[RETENTION_CHECK_CONF] = "false"
    before = latest_version(path)
    statement = f"VACUUM delta.`{path}` RETAIN {hours:g} HOURS"
    from spark_jobs.driver.session import session_conf

    with session_conf(spark, settings):
        candidates = len(spark.sql(statement + " DRY RUN").collect()) if dry_run else None
        if not dry_run:
            spark.sql(statement).collect()
    deleted = None
    if not dry_run:
        ends = [c for c in commit_infos(path) if c.get("version", -1) > before and c.get("operation") == "VACUUM END"]
        deleted = int_or_none((ends[0].get("operationMetrics") or {}).get("numDeletedFiles")) if ends else None
    return {
        "table": table.name,
        "command": "vacuum",
        "retention_hours": hours,
        "safety_minimum_hours": minimum,
        "forced": hours < minimum,
        "dry_run": dry_run,
        "files_deleted": deleted,
        "files_to_delete": candidates,
        "version": latest_version(path),
    }


# --- restore ---------------------------------------------------------------------------------------


def restore(spark, plan: RestorePlan) -> dict:
    """Carry out ``plan`` (one Delta transaction).

    :returns: the version it created and the rows and files it brought back and removed.
    """
    from delta.tables import DeltaTable

    [metrics] = DeltaTable.forPath(spark, str(plan.path)).restoreToVersion(plan.target_version).collect()
    return {
        "table": plan.table,
        "command": "restore",
        "restored_version": plan.target_version,
        "version_before": plan.current_version,
        "version": latest_version(plan.path),
        "files_restored": metrics["num_restored_files"],
        "files_removed": metrics["num_removed_files"],
        "rows": version_rows(plan.path),
    }


# --- convert ---------------------------------------------------------------------------------------

def convert(spark, lake: Lake, job: JobSpec, table: TableSpec) -> dict:
    """Convert ``table`` from Spark's file sink (``_spark_metadata``) to Delta in place.

    ``CONVERT TO DELTA`` takes the file list from the ``_spark_metadata`` log when there is one
    (``spark.databricks.delta.convert.useMetadataLog``, set here), so files a killed batch left in
    the folder without committing do not become rows; they stay on disk, untracked, until ``vacuum``
    deletes them after the retention. A table whose log lists no files becomes an empty Delta table
    with the job's schema. The file list is read once: stop the previous version's job first.

    :returns: status (``converted``, ``already_delta``, ``absent``), files converted, rows, and the
        untracked files left in the folder.
    """
    path = lake.table_path(table.name)
    if (path / "_delta_log").is_dir():
        return {"table": table.name, "command": "convert", "status": "already_delta", "path": str(path)}
    if not path.is_dir():
        return {"table": table.name, "command": "convert", "status": "absent", "path": str(path)}
    from spark_jobs.driver.job_modules import output_schemas

    schema = output_schemas(spark, job)[table.name]
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    partitions = ", ".join(f"`{c}` {types[c].upper()}" for c in table.partition_by)
    had_log = (path / "_spark_metadata").is_dir()
    listed = _file_sink_files(path) if had_log else None
    settings = {CONVERT_USES_METADATA_LOG_CONF: "true",
                LISTING_PARALLELISM_CONF: str(max(8, 4 * spark.sparkContext.defaultParallelism))}
    from spark_jobs.driver.session import session_conf

    with session_conf(spark, settings):
        if listed == []:
            _create_empty(spark, path, schema, table.partition_by)
        else:
            spark.sql(f"CONVERT TO DELTA parquet.`{path}`" + (f" PARTITIONED BY ({partitions})" if partitions else ""))
    tracked = {Path(uri.removeprefix("file://")).resolve() for uri in _file_uris(path)}
    on_disk = {p.resolve() for p in path.rglob("*.parquet")
               if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)}
    return {
        "table": table.name,
        "command": "convert",
        "status": "converted",
        "path": str(path),
        "from_spark_metadata": had_log,
        "files_converted": len(tracked),
        "rows": version_rows(path),
        "untracked_files": sorted(str(p.relative_to(path)) for p in on_disk - tracked),
        "version": latest_version(path),
    }


def _file_sink_files(path: Path) -> list[str]:
    """The files the file sink's ``_spark_metadata`` log lists (its latest compact file and later batches)."""
    log = path / "_spark_metadata"
    batches = sorted((p for p in log.iterdir() if re.fullmatch(r"\d+(\.compact)?", p.name)),
                     key=lambda p: int(p.name.split(".")[0]))
    compacts = [p for p in batches if p.name.endswith(".compact")]
    if compacts:
        batches = [p for p in batches if int(p.name.split(".")[0]) >= int(compacts[-1].name.split(".")[0])]
    files: dict[str, bool] = {}
    for batch in batches:
        for line in batch.read_text().splitlines()[1:]:
            if line.strip():
                entry = json.loads(line)
                if entry.get("action") == "delete":
                    files.pop(entry["path"], None)
                else:
                    files[entry["path"]] = True
    return list(files)


def _create_empty(spark, path: Path, schema, partition_by: tuple[str, ...]) -> None:
    """An empty Delta table with ``schema`` at ``path``, a folder that already holds the file sink's log.

    Delta refuses to create a table in a non-empty folder that is not a Delta table, so the table is
    created beside it and its ``_delta_log`` (no data files: nothing to relocate) moved in.
    """
    from delta.tables import DeltaTable
    from pyspark.sql.types import StructField, StructType

    nullable = StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
    scratch = path.parent / f".{path.name}.converting"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        (DeltaTable.createIfNotExists(spark).location(str(scratch)).addColumns(nullable)
         .partitionedBy(*partition_by).execute())
        (scratch / "_delta_log").rename(path / "_delta_log")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _file_uris(path: Path) -> list[str]:
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=delta_rs_options(path)).file_uris()


# --- the command -----------------------------------------------------------------------------------


