"""``python -m spark_jobs lake history|optimize|vacuum|restore|convert``: maintenance and recovery of the lake's
Delta tables (the work is in :mod:`spark_jobs.driver.lake_tools`; history and a restore's check read the log with
delta-rs, :mod:`spark_jobs.control.lake.delta_log`)."""

from __future__ import annotations

import argparse
import json
import sys

from spark_jobs.control.lake.delta_log import delta_path, history, restore_plan
from spark_jobs.driver.lake_tools import (check_retention, chosen_tables, convert, optimize, print_history, restore,
                                          safety_minimum_hours, vacuum)
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake

HELP = "Delta maintenance: optimize, vacuum, history, restore, convert"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``lake`` command's sub-commands and options."""
    sub = parser.add_subparsers(dest="lake_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--table", help="one registry table (default: every table)")
    common.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")

    hist = sub.add_parser("history", parents=[common], help="versions with operation, time, rows added/removed")
    hist.add_argument("--limit", type=int, default=20, help="newest versions per table (default 20)")
    hist.add_argument("--format", choices=("table", "json"), default="table")

    opt = sub.add_parser("optimize", parents=[common], help="compact small files (one Delta transaction per batch)")
    opt.add_argument("--where", help="only partitions matching this predicate, e.g. \"date >= '2024-03-01'\"")
    opt.add_argument("--zorder-by", help="comma-separated columns, or none (default: the registry's zorder_by)")
    opt.add_argument("--changed-only", action="store_true",
                     help="only partitions with two or more small files (appended to since the last optimize); "
                          "what the daily lake_maintenance DAG runs, so a Z-order does not rewrite the whole table")

    vac = sub.add_parser("vacuum", parents=[common], help="delete files older versions no longer need")
    vac.add_argument("--retention-hours", type=float,
                     help="keep what versions younger than this need (default: the registry's vacuum_retention_hours)")
    vac.add_argument("--dry-run", action="store_true", help="count the files it would delete, delete nothing")
    vac.add_argument("--force", action="store_true",
                     help="allow a retention below Delta's safety minimum (only when no job writes the table)")

    res = sub.add_parser("restore", parents=[common], help="make an earlier version the newest one")
    res.add_argument("--to-version", type=int, help="the version to bring back")
    res.add_argument("--to-timestamp", help="the newest version committed at or before this time (ISO-8601, UTC)")
    res.add_argument("--yes", action="store_true", help="do it (without: print what it would do and exit 2)")

    sub.add_parser("convert", parents=[common],
                   help="convert tables of Spark's file sink (_spark_metadata) to Delta in place")


def _is_delta(lake: Lake, table: str) -> bool:
    return (lake.table_path(table) / "_delta_log").is_dir()


def _absent(lake: Lake, table: str, command: str) -> dict:
    """The result line of ``optimize``/``vacuum`` for a table no job has written yet."""
    return {"table": table, "command": command, "status": "absent", "path": str(lake.table_path(table))}


def _zorder(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    if text.strip().lower() == "none":
        return ()
    return tuple(c.strip() for c in text.split(",") if c.strip())


def run(args: argparse.Namespace, spark=None, out=sys.stdout) -> int:
    """Run ``python -m spark_jobs lake <command>`` with parsed ``args`` (``spark``: a session to reuse)."""
    lake = Lake.at(args.lake)
    tables = chosen_tables(args.table)
    command = args.lake_command
    if command == "history":
        entries = [e for _job, table in tables if (lake.table_path(table.name) / "_delta_log").is_dir() or args.table
                   for e in history(lake, table.name, args.limit)]
        print_history(entries, args.format, out)
        return 0
    if command == "restore":
        if not args.table:
            raise UsageError("restore needs --table T (one table at a time)")
        plan = restore_plan(lake, args.table, args.to_version, args.to_timestamp)
        if not args.yes:
            raise UsageError(f"{plan.describe()}. Run again with --yes to do it")
        print(f"{plan.describe()}.", file=sys.stderr)
    if command == "vacuum":  # a retention below the safety minimum is refused before a JVM starts
        for _job, table in tables:
            path = lake.table_path(table.name)
            if (path / "_delta_log").is_dir():
                hours = float(table.vacuum_retention_hours if args.retention_hours is None else args.retention_hours)
                check_retention(table.name, hours, safety_minimum_hours(path), args.force)
    if command in ("optimize", "vacuum"):
        # A registry table no job has written yet has nothing to compact or delete: reported as absent
        # (lake_maintenance runs before every job has run), without a JVM when no table is there.
        for _job, table in tables:
            if (lake.table_path(table.name) / "_spark_metadata").is_dir():
                delta_path(lake, table.name)  # the old file-sink layout: refused with the way out
        if not any(_is_delta(lake, table.name) for _job, table in tables):
            for _job, table in tables:
                print(json.dumps(_absent(lake, table.name, command)), file=out, flush=True)
            return 0
    if spark is None:
        from spark_jobs.driver.session import build_session

        spark = build_session(f"spark_jobs_lake_{command}")
    if command == "restore":
        result = restore(spark, plan)
        print(f"restored {plan.table} to the contents of version {plan.target_version}: created version "
              f"{result['version']}", file=sys.stderr)
        print(json.dumps(result), file=out)
        return 0
    for job, table in tables:
        if command == "convert":
            result = convert(spark, lake, job, table)
        elif not _is_delta(lake, table.name):
            result = _absent(lake, table.name, command)
        elif command == "optimize":
            result = optimize(spark, lake, table, args.where, _zorder(args.zorder_by), changed_only=args.changed_only)
        else:
            result = vacuum(spark, lake, table, args.retention_hours, args.force, args.dry_run)
        print(json.dumps(result), file=out, flush=True)
    return 0
