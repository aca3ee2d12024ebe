"""``python -m spark_jobs reprocess JOB --from-time T``: replay a job's input delivered from a time on."""

from __future__ import annotations

import argparse

from spark_jobs.model.errors import UsageError
from spark_jobs.model.streams import KafkaSource
from spark_jobs.registry import JOBS, get_job

HELP = "replay a job's input delivered from a time on into its tables (one Delta commit per table; see spark_jobs.driver.reprocess)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    parser.add_argument("--from-time", required=True, help="delivery time to replay from, ISO-8601 (UTC unless "
                        "it names an offset)")
    parser.add_argument("--input", help="the input folder (default: $<JOB>_INPUT, else the registry's)")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be replayed and rebuilt; write nothing")
    parser.add_argument("--audit-id", help="the ops_audit row this run belongs to (a uuid; goes into the commits)")


def run(args: argparse.Namespace) -> int:
    """Check the time and the replay (no JVM); unless a dry run, rebuild the tables. One JSON line on stdout."""
    import datetime as dt
    import json
    import re
    from pathlib import Path

    from spark_jobs.model.lake import Lake
    from spark_jobs.control.oncall.requests import check_reprocess

    job = get_job(args.job)
    lake = Lake.at(args.lake)
    if isinstance(job.source, KafkaSource):
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
    from spark_jobs.driver.lineage import reported_reprocess
    from spark_jobs.driver.reprocess import reprocess
    from spark_jobs.driver.session import configure_logging
    from spark_jobs.driver.session import build_session

    configure_logging()
    spark = build_session(f"{job.name}_reprocess")
    with reported_reprocess(job, lake, replay.source, spark) as lineage:  # OpenLineage: one run (docs/lineage.md)
        result = reprocess(spark, job, lake, replay.source, checked["from_time"], args.audit_id)
        if lineage is not None:
            lineage.batch(result["files"], {table: done.get("rows_written") or 0
                                            for table, done in result["tables"].items()})
    print(json.dumps(result, sort_keys=True, default=str))
    return 0
