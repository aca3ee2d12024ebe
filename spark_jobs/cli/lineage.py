"""``python -m spark_jobs lineage TABLE [--since TIME|DURATION] [--all] [--lake PATH] [--json]``: the runs that
wrote a table, from the OpenLineage events in the lake (:mod:`spark_jobs.control.lineage.reading`): for each Spark
run, the Airflow DAG run and task that submitted it, its inputs and the rows it wrote into the table.

No Spark and no Airflow: it reads ``<lake>/_lineage/spark/`` and ``<lake>/_lineage/airflow/`` (docs/lineage.md).
Exit status 0 (also when no run wrote the table), 2 for a bad value.

Example::

    cloudtrail_events (file:/srv/etl/lake/tables/cloudtrail_events): 2 runs
    STARTED                      STATE     ROWS  AIRFLOW (DAG / DAG RUN / TASK, TRY)                              SPARK RUN                             INPUTS
    2026-12-07T15:40:01.2+00:00  COMPLETE  1255  cloudtrail_etl_catchup / manual__2026-12-07T15:39 / spark_submit, 1  0193a1c0-...  file:/srv/etl/landing (31 files)
"""

from __future__ import annotations

import argparse
import json

HELP = "the runs that wrote a table (OpenLineage events): DAG run, task, Spark run, inputs, rows"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", help="a table of the lake (cloudtrail_events, ...)")
    parser.add_argument("--since", help="only runs started since this ISO-8601 time (UTC unless it says) or this long "
                                        "ago ('2 days', '6 hours')")
    parser.add_argument("--all", action="store_true", help="also the runs that wrote no row into it")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")


def since_time(text: str | None):
    """``--since``: an ISO-8601 time, or a duration back from now."""
    import datetime as dt

    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.times import duration_seconds, parse_utc

    if not text:
        return None
    try:
        return parse_utc(text, "--since")
    except UsageError:
        try:
            return dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=duration_seconds(text, "--since"))
        except UsageError:
            raise UsageError(f"--since {text!r} is neither a time (2026-12-01T08:00Z) nor a duration ('2 days')") \
                from None


def run(args: argparse.Namespace) -> int:
    from spark_jobs.control.lineage.emitter import events_dir
    from spark_jobs.control.lineage.reading import table_runs
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.lake import Lake
    from spark_jobs.registry import all_tables

    tables = all_tables()
    if args.table not in tables:
        raise UsageError(f"no table {args.table!r}; the tables: {', '.join(sorted(tables))}")
    lake = Lake.at(args.lake)
    table, runs = table_runs(lake.root, args.table, since=since_time(args.since), include_empty=args.all)
    if args.json:
        for found in runs:
            print(json.dumps(found.to_dict(), sort_keys=True))
        return 0
    print(f"{args.table} ({table.namespace}:{table.name}): {len(runs)} run{'s' if len(runs) != 1 else ''}")
    if not runs:
        print(f"  no event in {events_dir(lake.root)} names it as an output (docs/lineage.md)")
        return 0
    header = ("STARTED", "STATE", "ROWS", "AIRFLOW (DAG / DAG RUN / TASK, TRY)", "SPARK RUN", "INPUTS")
    lines = [header] + [(r.started or "?", r.state, str(r.rows), _airflow(r), r.run_id, ", ".join(r.inputs))
                        for r in runs]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)) + "  " + line[-1])
    return 0


def _airflow(found) -> str:
    if not found.parent_job:
        return "- (not started by Airflow)"
    task = found.parent_job.removeprefix(f"{found.dag_id}.") if found.dag_id else found.parent_job
    try_text = f", {found.try_number}" if found.try_number is not None else ""
    return f"{found.dag_id or '?'} / {found.dag_run_id or '?'} / {task}{try_text}"
