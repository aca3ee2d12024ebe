"""``python -m spark_jobs rollout JOB VERSION``: move a running continuous job to a new version (docs/deploying.md).

The job's supervisor checks the version against the live checkpoint and tables while the old driver runs
(pre-flight), hands over to it (a few seconds without commits), watches it on probation and rolls it back by itself.
The command asks for it and, with ``--wait``, follows it to its end. In Airflow the same request is the on-call
action ``rollout``.

Examples::

    python -m spark_jobs rollout cloudtrail_etl v2 --by alice --reason "parser fix" --wait 900
    python -m spark_jobs rollout cloudtrail_etl --status
    python -m spark_jobs rollout cloudtrail_etl v3 --destructive             # the plan of a destructive rollout
    python -m spark_jobs rollout cloudtrail_etl v3 --destructive --yes --reason "column type"

``--destructive`` deploys a version that pre-flight refused (a new checkpoint, the tables rebuilt from the input:
:mod:`spark_jobs.control.rollout.destructive`); without ``--yes`` it prints the plan and exits 2. The on-call action
``rollout_destructive`` is the same request behind four eyes.

Exit status: 0 asked for (or, with ``--wait``, done), 1 refused, failed or rolled back, 2 a bad request (an unknown
version, a rollout under way, no supervisor running), or the plan of ``--destructive`` printed without ``--yes``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import time

from spark_jobs.registry import JOBS, get_job

HELP = "move a running continuous job to a new version: pre-flight, handover, probation, rollback"
POLL_SECONDS = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a continuous job: {', '.join(j for j, s in JOBS.items() if s.continuous_trigger)}")
    parser.add_argument("version", nargs="?", help="a release's name (`python -m spark_jobs release list`)")
    parser.add_argument("--status", action="store_true", help="print the job's last rollout and exit")
    parser.add_argument("--wait", type=float, metavar="SECONDS", help="follow the rollout until it ends")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--by", help="who asks (default: this user's login name)")
    parser.add_argument("--reason", help="why, for the events and the timeline")
    parser.add_argument("--json", action="store_true", help="print the rollout as JSON")
    parser.add_argument("--destructive", action="store_true",
                        help="a version pre-flight refused: a new checkpoint, the tables moved aside and rebuilt")
    parser.add_argument("--yes", action="store_true", help="with --destructive: do it (without: print the plan, exit 2)")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.control.rollout.ask import ask_for_rollout
    from spark_jobs.control.rollout.request import ACTIVE, describe, read_rollout
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.lake import Lake

    job = get_job(args.job)
    lake = Lake.at(args.lake)
    control = str(lake.control_path(job.name))
    if args.status or args.version is None:
        if not args.status:
            raise UsageError("give a VERSION to roll out, or --status")
        found = read_rollout(control)
        print(json.dumps(found, sort_keys=True) if args.json else describe(found))
        return 0
    if args.yes and not args.destructive:
        raise UsageError("--yes is for --destructive only (a rollout is checked in pre-flight, nothing to confirm)")
    if args.destructive:
        asked = _destructive(job, lake, args)
        if asked is None:
            return 2
    else:
        asked = ask_for_rollout(job, lake, args.version, args.by or getpass.getuser(), args.reason)
    print(describe(asked))
    if args.wait is None:
        return 0
    deadline, said = time.monotonic() + args.wait, asked["phase"]
    rollout = asked
    while time.monotonic() < deadline:
        rollout = read_rollout(control) or rollout
        if rollout.get("id") == asked["id"] and rollout.get("phase") != said:
            said = rollout["phase"]
            print(describe(rollout), flush=True)
        if rollout.get("id") != asked["id"] or rollout.get("phase") not in ACTIVE:
            break
        time.sleep(POLL_SECONDS)
    if args.json:
        print(json.dumps(rollout, sort_keys=True))
    return 0 if rollout.get("phase") == "done" else 1


def _destructive(job, lake, args) -> dict | None:
    """The destructive rollout's plan (None: printed, not asked for), or with ``--yes`` the request written."""
    from spark_jobs.control.oncall.requests import JobState
    from spark_jobs.control.rollout.destructive import ask_for_destructive_rollout, check_destructive_rollout, \
        destructive_plan

    if not args.yes:
        verdict = check_destructive_rollout(job, lake, args.version)
        for number, line in enumerate(destructive_plan(job, lake, args.version, verdict,
                                                       JobState.read(job, lake).driver()), 1):
            print(f"{number}. {line}")
        print("run again with --yes to do it (the on-call action rollout_destructive asks a second person first)")
        return None
    return ask_for_destructive_rollout(job, lake, args.version, args.by or getpass.getuser(), args.reason)
