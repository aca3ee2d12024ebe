"""The command line: ``python -m spark_jobs {list,run,sql,lake,checkpoint,status,state,supervise,trial,sample-data,bench}``.

Examples::

    python -m spark_jobs list
    python -m spark_jobs run cloudtrail_etl --input landing/cloudtrail --trigger available-now
    python -m spark_jobs run cloudtrail_etl --trigger processing-time:10s     # until SIGTERM
    python -m spark_jobs sql --format json "SELECT eventName, count(*) n FROM cloudtrail_events GROUP BY 1"
    python -m spark_jobs sql --engine duckdb --as-of 3 "SELECT count(*) FROM cloudtrail_events"   # no JVM
    python -m spark_jobs lake optimize --table cloudtrail_events               # also vacuum, history, restore
    python -m spark_jobs checkpoint inspect cloudtrail_etl --json             # health without Spark
    python -m spark_jobs checkpoint repair cloudtrail_etl --apply             # the doctor
    python -m spark_jobs status [--json]                                      # every job's health, alerts
    python -m spark_jobs state cloudtrail_alerts --show 5                     # a stateful job's state
    python -m spark_jobs bench --quick                                        # JSON report on stdout

Backfills of historical logs into the live tables (own checkpoint per source and date range)::

    python -m spark_jobs backfill cloudtrail_etl --source /data/history --date-from 2024-01-01 \
        --date-to 2024-03-31 [--max-files-per-trigger 500] [--dry-run]

Reprocessing the input delivered from a time on (each table rebuilt in one Delta commit)::

    python -m spark_jobs reprocess cloudtrail_etl --from-time 2024-03-02T00:00:00Z [--dry-run]

Supervised, always-on runs (the driver is restarted with backoff; see spark_jobs.control.supervision)::

    python -m spark_jobs supervise cloudtrail_etl --input landing/cloudtrail  # until SIGTERM / Ctrl-C
    python -m spark_jobs trial recovery --kills 5        # kill -9 the supervised driver, time recovery
    python -m spark_jobs trial soak --minutes 30         # a healthy supervised job must not restart

Exit status: 0 done, 1 the job or query failed (or its driver lost the checkpoint's lease), 2 a bad
value on the command line (one line on stderr names it and what to do), 3 another live driver holds
the job's checkpoint (one line on stderr names its pid, host and heartbeat age; nothing was started).
``supervise`` exits 0 when stopped, 1 when it gave up restarting.
"""

from __future__ import annotations

import argparse
import sys

from spark_jobs.model.errors import UsageError, positive_int
from spark_jobs.cli.tools import TOOL_COMMANDS, run_tool
from spark_jobs.cli.tools import add_parsers as add_tool_parsers
from spark_jobs.registry import JOBS, get_job


def _positive_int(text: str) -> int:
    return positive_int(text, "--max-files-per-trigger")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("list", help="the registered jobs and their tables")

    run = commands.add_parser("run", help="run a job as a Structured Streaming query")
    run.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    run.add_argument("--input", help="landing folder to read (default: the registry's, or $<JOB>_INPUT)")
    run.add_argument("--lake", help="lake root for tables and checkpoints (default: $LAKE_ROOT or ./lake)")
    run.add_argument("--trigger", help="available-now | processing-time:<duration> (default: the registry's)")
    run.add_argument("--max-files-per-trigger", help="files per micro-batch (default: the registry's)")
    run.add_argument("--latest-first", action="store_true", help="newest files first (for catching up on a backlog)")
    run.add_argument("--table-format", help="delta, the only format (kept for scripts that pass it)")
    run.add_argument("--lease-ttl", type=float, metavar="SECONDS",
                     help="ttl of the driver's lease on the checkpoint (default: the registry's lease_ttl_seconds)")
    run.add_argument("--max-offsets-per-trigger", help="Kafka jobs: messages per micro-batch (default: the registry's)")
    run.add_argument("--starting-timestamp", help="Kafka jobs, first start only: read from this time (ISO-8601, UTC)")

    sql = commands.add_parser("sql", help="run one SQL query over the lake's tables")
    sql.add_argument("query", help="SQL; every registry table is a view of its name")
    sql.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    sql.add_argument("--format", choices=("table", "json"), default="table",
                     help="table (default) or json: one JSON object per row")
    sql.add_argument("--limit", type=int, default=1000, help="at most this many rows (default 1000)")
    sql.add_argument("--engine", choices=("spark", "duckdb"), default="spark",
                     help="spark (default; starts a JVM) or duckdb (delta-rs + DuckDB, no JVM, ~1 s)")
    sql.add_argument("--as-of", action="append", metavar="[TABLE=]VERSION|TIMESTAMP",
                     help="read every table (or TABLE) as of a version or a time (ISO-8601, UTC); repeatable")

    from spark_jobs.driver.lake_tools import add_arguments as add_lake_arguments

    lake = commands.add_parser("lake", help="Delta maintenance: optimize, vacuum, history, restore, convert")
    add_lake_arguments(lake)

    supervise = commands.add_parser("supervise", help="run a job continuously, restarting its driver when it fails")
    supervise.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    supervise.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    supervise.add_argument("--input", help="landing folder (default: the registry's, or $<JOB>_INPUT)")
    supervise.add_argument("--trigger", help="processing-time:<duration> (default: the registry's continuous_trigger)")
    supervise.add_argument("--spark-submit", action="store_true",
                           help="start the driver with spark-submit (client mode) instead of python -m spark_jobs run")
    supervise.add_argument("--lease-ttl", type=float, metavar="SECONDS", help="the driver's lease ttl (default: the registry's)")
    supervise.add_argument("--policy", metavar="JSON",
                           help="RestartPolicy fields to override, e.g. '{\"max_restarts\": 2}' (default: the registry's)")

    from spark_jobs.cli.checkpoint import add_arguments as add_checkpoint_arguments  # checkpoint's section

    backfill = commands.add_parser("backfill", help="load a folder's historical files of a date range into a job's tables")
    backfill.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    backfill.add_argument("--source", required=True, help="absolute folder under the job's input roots")
    backfill.add_argument("--date-from", help="first delivery date, YYYY-MM-DD (UTC); without both dates every "
                                              "file of the source is loaded, dated or not")
    backfill.add_argument("--date-to", help="last delivery date, YYYY-MM-DD (UTC), inclusive (default: today)")
    backfill.add_argument("--time-from", help="instead of dates: the first delivery time, ISO-8601 (UTC), e.g. an "
                                              "Airflow data interval's start")
    backfill.add_argument("--time-to", help="the end of the time window (exclusive), ISO-8601 (UTC)")
    backfill.add_argument("--max-files-per-trigger", help="files per micro-batch (default: the registry's)")
    backfill.add_argument("--dry-run", action="store_true", help="list the files and their count; write nothing")
    backfill.add_argument("--priority", help="CPU priority of the driver: idle (SCHED_IDLE), nice:N or normal "
                                             "(default: $<JOB>_BACKFILL_PRIORITY, else the registry's)")
    backfill.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    reprocess = commands.add_parser("reprocess", help="replay a job's input delivered from a time on into its tables "
                                                      "(one Delta commit per table; see spark_jobs.driver.reprocess)")
    reprocess.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    reprocess.add_argument("--from-time", required=True, help="delivery time to replay from, ISO-8601 (UTC unless "
                                                              "it names an offset)")
    reprocess.add_argument("--input", help="the input folder (default: $<JOB>_INPUT, else the registry's)")
    reprocess.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    reprocess.add_argument("--dry-run", action="store_true", help="say what would be replayed and rebuilt; write nothing")
    reprocess.add_argument("--audit-id", help="the ops_audit row this run belongs to (a uuid; goes into the commits)")
    checkpoint = commands.add_parser("checkpoint", help="a job's checkpoint: inspect its health, repair damage")
    add_checkpoint_arguments(checkpoint)

    from spark_jobs.control.monitoring.status import add_arguments as add_status_arguments  # monitoring's section

    status = commands.add_parser("status", help="every job's health: state, last commit, backlog, restarts, alerts")
    add_status_arguments(status)

    from spark_jobs.driver.stream_state import add_arguments as add_state_arguments

    add_state_arguments(commands.add_parser("state", help="a stateful job's state: operators, variables, rows"))

    from spark_jobs.cli.forward import add_arguments as add_forward_arguments  # kafka's section

    add_forward_arguments(commands.add_parser("forward", help="forward a table's new rows to a Kafka topic "
                                                               "(spark_jobs.driver.forward)"))
    add_tool_parsers(commands)
    return parser


def _cmd_list(_args) -> int:
    for job in JOBS.values():
        print(f"{job.name}: {job.description}")
        where = (f"input {job.default_input} (${job.input_env_var})" if job.source.kind == "files"
                 else f"reads {job.source.describe()} as a stream")
        print(f"  {where}, trigger {job.default_trigger}, "
              f"schedule {job.schedule}, format delta")
        for table in job.tables:
            parts = f" partitioned by {', '.join(table.partition_by)}" if table.partition_by else ""
            print(f"  table {table.name}{parts}: {table.description}")
    return 0


def _cmd_run(args) -> int:
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.triggers import parse_trigger

    job = get_job(args.job)
    trigger = parse_trigger(args.trigger or job.default_trigger)
    if args.table_format not in (None, "delta"):  # accepted for scripts that pass it: every table is a Delta table
        hint = (" (the file-sink parquet format was removed; a lake in that layout is converted by "
                "python -m spark_jobs lake convert)" if args.table_format == "parquet" else "")
        raise UsageError(f"unknown table format {args.table_format!r}; use one of: delta{hint}")
    options = dict(job.file_source_options)
    if args.max_files_per_trigger is not None:
        options["maxFilesPerTrigger"] = str(_positive_int(args.max_files_per_trigger))
    if args.latest_first:
        options["latestFirst"] = "true"
    if job.source.kind == "kafka":
        from spark_jobs.control.kafka_options import run_overrides

        # The DAG forms' "files per micro-batch" is messages per micro-batch for a Kafka job.
        per_trigger = options.pop("maxFilesPerTrigger", None)
        options.update(run_overrides(args.max_offsets_per_trigger or per_trigger, args.starting_timestamp))

    from spark_jobs.driver.session import configure_logging

    from spark_jobs.model.runs import RunOptions

    from spark_jobs.driver.runner import resolve_input, run_streaming

    if args.lease_ttl is not None and args.lease_ttl <= 0:
        raise UsageError(f"--lease-ttl must be a number of seconds > 0, got {args.lease_ttl:g}")
    run_options = RunOptions(resolve_input(job, args.input, args.lake), Lake.at(args.lake), trigger, options,
                             lease_ttl_seconds=args.lease_ttl)
    configure_logging()
    summary = run_streaming(job, run_options)
    print(summary.to_json())
    return 0


def _cmd_sql(args) -> int:
    from spark_jobs.driver.sql import run_query

    return run_query(args.query, lake=args.lake, engine=args.engine, output_format=args.format, limit=args.limit,
                     as_of=args.as_of)


def _cmd_lake(args) -> int:
    from spark_jobs.driver.lake_tools import run_command

    return run_command(args)


def _cmd_supervise(args) -> int:
    """Supervise in the foreground: events as JSON lines on stdout; SIGTERM/Ctrl-C stop gracefully."""
    import json
    import logging
    import signal
    import threading

    from spark_jobs.model.lake import Lake
    from spark_jobs.driver.runner import resolve_input
    from spark_jobs.control.supervision.command import driver_command
    from spark_jobs.control.supervision.policy import policy_with_overrides
    from spark_jobs.control.supervision.supervisor import Supervisor

    job = get_job(args.job)
    policy = policy_with_overrides(job.restart, args.policy)
    lake = Lake.at(args.lake)
    input_path = resolve_input(job, args.input, args.lake)
    command = driver_command(job, lake=str(lake.root), input_path=str(input_path), trigger=args.trigger,
                             spark_submit=args.spark_submit, lease_ttl_seconds=args.lease_ttl)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    supervisor = Supervisor(job, lake, command, policy, should_stop=stop.is_set, input_path=str(input_path),
                            notify=lambda event: print(json.dumps(event, sort_keys=True), flush=True))
    outcome = supervisor.run()
    print(json.dumps({"job": job.name, "outcome": outcome, "log": str(supervisor.driver.log_path)}), flush=True)
    return 0 if outcome == "stopped" else 1


def _cmd_backfill(args) -> int:
    """Check the request, list its files; unless a dry run, run it available-now as its own writer.

    Prints one JSON line: the listing (dry run), or the run's summary with the backfill's writer name.
    """
    import json
    import os
    from pathlib import Path

    from spark_jobs.control.backfill import check_request, list_files, read_path

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
    from spark_jobs.control.priority import lower_priority, parse_priority
    from spark_jobs.driver.session import configure_logging
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming
    from spark_jobs.model.triggers import parse_trigger

    # The registry's, unless the environment says otherwise (drills, tests on a busy machine).
    priority = (args.priority or os.environ.get(f"{request.job.name.upper()}_BACKFILL_PRIORITY")
                or request.job.backfill_priority)
    parse_priority(priority)  # a bad value: one line, before Spark starts
    run_options = RunOptions(Path(read_path(request, listing)), Lake.at(args.lake), parse_trigger("available-now"),
                             request.file_source_options(), writer=request.writer, file_dates=request.file_dates,
                             file_times=window, expected_files=len(listing.files))
    configure_logging()
    lower_priority(priority)
    summary = run_streaming(request.job, run_options)
    print(json.dumps({**head, "dry_run": False, "listed_files": len(listing.files), **summary.__dict__},
                     sort_keys=True))
    return 0


def _cmd_reprocess(args) -> int:
    """Check the time and the replay (no JVM); unless a dry run, rebuild the tables. One JSON line on stdout."""
    import datetime as dt
    import json
    import re
    from pathlib import Path

    from spark_jobs.model.lake import Lake
    from spark_jobs.control.oncall_requests import check_reprocess

    job = get_job(args.job)
    lake = Lake.at(args.lake)
    if job.source.kind == "kafka":
        from spark_jobs.driver.kafka_reprocess import reprocess_command

        return reprocess_command(job, lake, args)
    if args.audit_id is not None and not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                                                      args.audit_id):
        raise UsageError(f"--audit-id {args.audit_id!r} is not a uuid")
    source = str(Path(args.input).resolve()) if args.input else None
    checked = check_reprocess(job, lake, args.from_time, source, dt.datetime.now(dt.timezone.utc))
    replay = checked["replay"]
    if args.dry_run:
        print(json.dumps({"job": job.name, "from_time": checked["from_time"].isoformat(), "source": str(replay.source),
                          "dry_run": True, **replay.listing.summary(), "missing_files": replay.missing},
                         sort_keys=True, default=str))
        return 0
    from spark_jobs.driver.reprocess import reprocess
    from spark_jobs.driver.session import configure_logging
    from spark_jobs.driver.session import build_session

    configure_logging()
    spark = build_session(f"{job.name}_reprocess")
    result = reprocess(spark, job, lake, replay.source, checked["from_time"], args.audit_id)
    print(json.dumps(result, sort_keys=True, default=str))
    return 0


COMMANDS = {"supervise": _cmd_supervise,
            "list": _cmd_list, "run": _cmd_run, "sql": _cmd_sql, "backfill": _cmd_backfill, "reprocess": _cmd_reprocess,
            "lake": _cmd_lake}  # delta-tools


def _cmd_checkpoint(args) -> int:  # checkpoint's section
    from spark_jobs.cli.checkpoint import run

    return run(args)


COMMANDS["checkpoint"] = _cmd_checkpoint


def _cmd_status(args) -> int:  # monitoring's section
    from spark_jobs.control.monitoring.status import run

    return run(args)


def _cmd_state(args) -> int:  # analytics' section
    from spark_jobs.driver.stream_state import run

    return run(args)


COMMANDS["status"] = _cmd_status
COMMANDS["state"] = _cmd_state


def _cmd_forward(args) -> int:  # kafka's section
    from spark_jobs.cli.forward import run

    return run(args)


COMMANDS["forward"] = _cmd_forward


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] in TOOL_COMMANDS:  # the tool parses the rest itself
            return run_tool(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the one place failures become an exit status
        from spark_jobs.control.checkpoint.lease import LeaseHeld
        from spark_jobs.driver.runner import JobFailed

        if isinstance(exc, LeaseHeld):  # another live driver writes through this checkpoint
            print(f"error: {exc}", file=sys.stderr)
            return 3
        if isinstance(exc, JobFailed):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise
