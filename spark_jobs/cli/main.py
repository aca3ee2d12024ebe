"""The command line: ``python -m spark_jobs COMMAND``, one module of :mod:`spark_jobs.cli` per command.

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
    python -m spark_jobs metrics [--serve PORT]                               # the same as Prometheus metrics
    python -m spark_jobs lineage TABLE [--since T]                            # the runs that wrote a table (OpenLineage)
    python -m spark_jobs state cloudtrail_alerts --show 5                     # a stateful job's state
    python -m spark_jobs forward cloudtrail_alerts_to_kafka                   # a table's new rows to Kafka
    python -m spark_jobs backfill cloudtrail_etl --source /data/history --date-from 2024-01-01 \\
        --date-to 2024-03-31 [--max-files-per-trigger 500] [--dry-run]       # history into the live tables
    python -m spark_jobs reprocess cloudtrail_etl --from-time 2024-03-02T00:00:00Z [--dry-run]
    python -m spark_jobs reconcile cloudtrail_etl [--dry-run]                 # what the discovery window missed
    python -m spark_jobs supervise cloudtrail_etl --input landing/cloudtrail  # always on, until SIGTERM
    python -m spark_jobs standby cloudtrail_etl off                           # the warm standby, for every later run
    python -m spark_jobs release add v2 --git v2                              # a version kept for rollouts
    python -m spark_jobs rollout cloudtrail_etl v2 --wait 900                 # pre-flight, handover, probation
    python -m spark_jobs sample-data --out landing/cloudtrail                 # tools: generated input
    python -m spark_jobs bench --quick                                        # tools: JSON report on stdout
    python -m spark_jobs trial recovery --kills 5                             # tools: kill -9, time recovery

Exit status: 0 done, 1 the job or query failed (or its driver lost the checkpoint's lease), 2 a bad
value on the command line (one line on stderr names it and what to do), 3 another live driver holds
the job's checkpoint (one line on stderr names its pid, host and heartbeat age; nothing was started).
``supervise`` exits 0 when stopped, 1 when it gave up restarting.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from spark_jobs.cli import (backfill, checkpoint, forward, lake, lineage, list_jobs, metrics, reconcile, release,
                            reprocess, rollout, run, sql, standby, state, status, supervise)
from spark_jobs.cli.tools import TOOL_COMMANDS, run_tool
from spark_jobs.cli.tools import add_parsers as add_tool_parsers
from spark_jobs.model.errors import UsageError

# Each command's module has HELP, add_arguments(parser) and run(args) -> exit status.
COMMANDS: dict[str, ModuleType] = {
    "list": list_jobs, "run": run, "sql": sql, "lake": lake, "supervise": supervise, "backfill": backfill,
    "reprocess": reprocess, "checkpoint": checkpoint, "status": status, "state": state, "forward": forward,
    "reconcile": reconcile, "standby": standby, "metrics": metrics, "lineage": lineage, "release": release,
    "rollout": rollout,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_arguments(commands.add_parser(name, help=module.HELP))
    add_tool_parsers(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] in TOOL_COMMANDS:  # the tool parses the rest itself
            return run_tool(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command].run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the one place failures become an exit status
        from spark_jobs.control.checkpoint.lease import LeaseHeld
        from spark_jobs.control.supervision.ownership import LEASE_HELD_EXIT_STATUS
        from spark_jobs.driver.runner import JobFailed

        if isinstance(exc, LeaseHeld):  # another live driver writes through this checkpoint
            print(f"error: {exc}", file=sys.stderr)
            return LEASE_HELD_EXIT_STATUS
        from spark_jobs.control.rollout.preflight_state import PREFLIGHT_REFUSED_EXIT_STATUS
        from spark_jobs.driver.preflight import PreflightRefused

        if isinstance(exc, PreflightRefused):  # a new version that does not fit the live checkpoint or tables
            print(f"error: {exc}", file=sys.stderr)
            return PREFLIGHT_REFUSED_EXIT_STATUS
        if isinstance(exc, JobFailed):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise
