"""``python -m spark_jobs backfill JOB --source DIR``: load a folder's historical files into a job's tables."""

from __future__ import annotations

import argparse

from spark_jobs.registry import JOBS

HELP = "load a folder's historical files of a date range into a job's tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    parser.add_argument("--source", required=True, help="absolute folder under the job's input roots")
    parser.add_argument("--date-from", help="first delivery date, YYYY-MM-DD (UTC); without both dates every "
                        "file of the source is loaded, dated or not")
    parser.add_argument("--date-to", help="last delivery date, YYYY-MM-DD (UTC), inclusive (default: today)")
    parser.add_argument("--time-from", help="instead of dates: the first delivery time, ISO-8601 (UTC), e.g. an "
                        "Airflow data interval's start")
    parser.add_argument("--time-to", help="the end of the time window (exclusive), ISO-8601 (UTC)")
    parser.add_argument("--max-files-per-trigger", help="files per micro-batch (default: the registry's)")
    parser.add_argument("--dry-run", action="store_true", help="list the files and their count; write nothing")
    parser.add_argument("--priority", help="CPU priority of the driver: idle (SCHED_IDLE), nice:N or normal "
                        "(default: $<JOB>_BACKFILL_PRIORITY, else the registry's)")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")


def run(args: argparse.Namespace) -> int:
    """Check the request, list its files; unless a dry run, run it available-now as its own writer.

    Prints one JSON line: the listing (dry run), or the run's summary with the backfill's writer name.
    """
    import json
    import os
    from pathlib import Path

    from spark_jobs.control.catchup.backfill import check_request, list_files

    request = check_request(args.job, args.source, args.date_from, args.date_to, args.max_files_per_trigger,
                            args.dry_run, time_from=args.time_from, time_to=args.time_to)
    listing = list_files(request)
    dates, window = request.file_dates, request.time_window
    head = {"job": request.job.name, "writer": request.writer, "source": str(request.source),
            "date_from": dates and dates[0].isoformat(), "date_to": dates and dates[1].isoformat()}
    if window:
        head.update(time_from=window[0].isoformat(), time_to=window[1].isoformat())
    if request.dry_run:
        print(json.dumps({**head, "dry_run": True, **listing.summary()}, sort_keys=True))
        return 0
    from spark_jobs.model.lake import Lake
    from spark_jobs.control.catchup.priority import lower_priority, parse_priority
    from spark_jobs.driver.session import configure_logging
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming
    from spark_jobs.model.triggers import parse_trigger

    # The registry's, unless the environment says otherwise (drills, tests on a busy machine).
    priority = (args.priority or os.environ.get(f"{request.job.name.upper()}_BACKFILL_PRIORITY")
                or request.job.backfill_priority)
    parse_priority(priority)  # a bad value: one line, before Spark starts
    run_options = RunOptions(request.source, Lake.at(args.lake), parse_trigger("available-now"),
                             request.file_source_options(), writer=request.writer, file_dates=request.file_dates,
                             file_times=window, expected_files=len(listing.files))
    configure_logging()
    lower_priority(priority)
    summary = run_streaming(request.job, run_options)
    print(json.dumps({**head, "dry_run": False, "listed_files": len(listing.files), **summary.__dict__},
                     sort_keys=True))
    return 0
