"""``python -m spark_jobs run JOB``: run a job as a Structured Streaming query (available-now, or until SIGTERM)."""

from __future__ import annotations

import argparse

from spark_jobs.model.errors import UsageError, positive_int
from spark_jobs.model.streams import KafkaSource
from spark_jobs.registry import JOBS, get_job

HELP = 'run a job as a Structured Streaming query'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    parser.add_argument("--input", help="landing folder to read (default: the registry's, or $<JOB>_INPUT)")
    parser.add_argument("--lake", help="lake root for tables and checkpoints (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--trigger", help="available-now | processing-time:<duration> (default: the registry's)")
    parser.add_argument("--max-files-per-trigger", help="files per micro-batch (default: the registry's)")
    parser.add_argument("--latest-first", action="store_true", help="newest files first (for catching up on a backlog)")
    parser.add_argument("--lease-ttl", type=float, metavar="SECONDS",
                        help="ttl of the driver's lease on the checkpoint (default: the registry's lease_ttl_seconds)")
    parser.add_argument("--max-offsets-per-trigger", help="Kafka jobs: messages per micro-batch (default: the registry's)")
    parser.add_argument("--starting-timestamp", help="Kafka jobs, first start only: read from this time (ISO-8601, UTC)")
    parser.add_argument("--start-at", metavar="TIME", help="a file job's first start only (no checkpoint yet): ignore "
                        "files delivered before TIME (ISO-8601, UTC, or 'now'); its history is not listed, load it "
                        "with backfill")
    parser.add_argument("--lookback", metavar="DURATION", help="a file job's discovery window behind the newest "
                        "delivery (e.g. '6 hours'; default: $<JOB>_LOOKBACK, else the key layout's)")
    parser.add_argument("--standby", action="store_true", help="a continuous run: start, warm up, wait for the "
                        "checkpoint's lease and take over the moment it is free (a warm standby of a running driver)")
    parser.add_argument("--preflight", action="store_true", help="with --standby: a new version's standby, checked "
                        "against the live checkpoint and tables first (sources, state, output schema, stored "
                        "options); refused with exit status 4 and the reason, touching nothing (docs/deploying.md)")
    parser.add_argument("--queue-url", help="a file job on a bucket: read its S3 event notifications from this SQS "
                        "queue instead of listing (default: $<JOB>_QUEUE_URL)")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.triggers import parse_trigger

    job = get_job(args.job)
    trigger = parse_trigger(args.trigger or job.default_trigger)
    options = dict(job.file_source_options)
    if args.max_files_per_trigger is not None:
        options["maxFilesPerTrigger"] = str(positive_int(args.max_files_per_trigger, "--max-files-per-trigger"))
    if args.latest_first:
        options["latestFirst"] = "true"
    if isinstance(job.source, KafkaSource):
        from spark_jobs.control.kafka.options import run_overrides

        # The DAG forms' "files per micro-batch" is messages per micro-batch for a Kafka job.
        per_trigger = options.pop("maxFilesPerTrigger", None)
        options.update(run_overrides(args.max_offsets_per_trigger or per_trigger, args.starting_timestamp))

    from spark_jobs.driver.session import configure_logging

    from spark_jobs.model.runs import RunOptions

    from spark_jobs.driver.runner import resolve_input, run_streaming

    if args.preflight and not args.standby:
        raise UsageError("--preflight checks a new version's standby: give --standby too")
    if args.lease_ttl is not None and args.lease_ttl <= 0:
        raise UsageError(f"--lease-ttl must be a number of seconds > 0, got {args.lease_ttl:g}")
    run_options = RunOptions(resolve_input(job, args.input, args.lake), Lake.at(args.lake), trigger, options,
                             lease_ttl_seconds=args.lease_ttl, standby=args.standby, preflight=args.preflight,
                             **discovery_arguments(job, args))
    configure_logging()
    summary = run_streaming(job, run_options)
    print(summary.to_json())
    return 0


def discovery_arguments(job, args: argparse.Namespace) -> dict:
    """``--start-at``, ``--lookback`` and ``--queue-url`` as :class:`~spark_jobs.model.runs.RunOptions` fields, checked.

    :raises UsageError: for a job that does not discover files, or a bad time or duration.
    """
    given = {"start_at": args.start_at, "lookback": args.lookback, "queue_url": args.queue_url}
    if not any(given.values()):
        return {}
    if not job.discovers_files:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k, v in given.items() if v)
        raise UsageError(f"{flags}: job {job.name} does not discover files by a key layout ({job.source.describe()})")
    import datetime as dt

    from spark_jobs.model.times import duration_seconds, parse_utc

    if args.start_at:
        now = dt.datetime.now(dt.timezone.utc)
        given["start_at"] = now if args.start_at.strip().lower() == "now" else parse_utc(args.start_at, "--start-at")
    if args.lookback:
        duration_seconds(args.lookback, "--lookback")
    if args.queue_url and not args.queue_url.startswith(("https://", "http://")):
        raise UsageError(f"--queue-url {args.queue_url!r} is not an SQS queue URL (https://sqs.<region>.amazonaws.com/"
                         "<account>/<queue>)")
    return given
