"""``python -m spark_jobs reconcile JOB``: list the landing's whole history and ingest what discovery missed.

Usage (the daily DAG ``<job>_reconcile`` spark-submits exactly this)::

    python -m spark_jobs reconcile cloudtrail_etl [--input DIR] [--lake L] [--since 2024-01-01] [--dry-run]

Prints one JSON line: what the full listing found (``listed``, ``live_window``, ``already_ingested``,
``before_start``: delivered before the stream's declared start, left to a backfill; ``missed``) and, unless a dry
run, the run that ingested the missed files; a dry run says ``would_ingest`` and ingests nothing
(:mod:`spark_jobs.control.discovery.reconcile`).
"""

from __future__ import annotations

import argparse

from spark_jobs.registry import JOBS

HELP = "list a landing's whole history and ingest, exactly once, the files discovery's window missed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a registered job that discovers files: {', '.join(JOBS)}")
    parser.add_argument("--input", help="the landing (default: $<JOB>_INPUT, else the registry's)")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--since", help="only files delivered at or after this (ISO-8601 date or time, UTC; "
                        "default: the whole history)")
    parser.add_argument("--dry-run", action="store_true", help="list and compare; ingest nothing")


def run(args: argparse.Namespace) -> int:
    import datetime as dt
    import json
    import time

    from spark_jobs.control.discovery import reconcile
    from spark_jobs.control.discovery.settings import run_settings
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.model.times import parse_utc
    from spark_jobs.model.triggers import parse_trigger
    from spark_jobs.registry import get_job

    job = get_job(args.job)
    if not job.discovers_files:
        raise UsageError(f"job {job.name} does not discover files by a key layout ({job.source.describe()}): there is "
                         "no window to reconcile")
    from spark_jobs.driver.runner import resolve_input

    started, now = time.monotonic(), dt.datetime.now(dt.timezone.utc)
    since = parse_utc(args.since, "--since") if args.since else None
    lake = Lake.at(args.lake)
    live = RunOptions(resolve_input(job, args.input, args.lake), lake, parse_trigger("available-now"),
                      dict(job.file_source_options))
    found = reconcile.plan(job, lake, run_settings(job, live), since)
    result = None
    if found.missed and not args.dry_run:
        from spark_jobs.driver.runner import run_streaming
        from spark_jobs.driver.session import configure_logging

        listed = reconcile.write_file_list(lake, job, found.missed, now)
        configure_logging()
        options = RunOptions(live.input_path, lake, live.trigger, dict(job.file_source_options),
                             writer=reconcile.WRITER, file_list=listed, expected_files=len(found.missed))
        result = run_streaming(job, options).__dict__
    report = reconcile.report_of(found, started, now, result)
    if args.dry_run:
        report["would_ingest"] = len(found.missed)
    else:
        reconcile.write_report(lake, job, report)
    print(json.dumps({"job": job.name, "dry_run": args.dry_run, **report}, sort_keys=True, default=str))
    return 0
