"""``python -m spark_jobs supervise JOB``: run a job continuously, restarting its driver when it fails."""

from __future__ import annotations

import argparse
import sys

from spark_jobs.registry import JOBS, get_job

HELP = 'run a job continuously, restarting its driver when it fails'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--input", help="landing folder (default: the registry's, or $<JOB>_INPUT)")
    parser.add_argument("--trigger", help="processing-time:<duration> (default: the registry's continuous_trigger)")
    parser.add_argument("--spark-submit", action="store_true",
                        help="start the driver with spark-submit (client mode) instead of python -m spark_jobs run")
    parser.add_argument("--lease-ttl", type=float, metavar="SECONDS", help="the driver's lease ttl (default: the registry's)")
    parser.add_argument("--warm-standby", action=argparse.BooleanOptionalAction, default=None,
                        help="keep a warmed-up second driver waiting on the lease, which takes over the moment the "
                             "driver dies, for this run (default: the job's setting: `python -m spark_jobs standby "
                             "JOB`, else the registry's RestartPolicy.warm_standby)")
    parser.add_argument("--policy", metavar="JSON",
                        help="RestartPolicy fields to override, e.g. '{\"max_restarts\": 2}' (default: the registry's)")


def run(args: argparse.Namespace) -> int:
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
                            notify=lambda event: print(json.dumps(event, sort_keys=True), flush=True),
                            warm_standby=args.warm_standby)
    outcome = supervisor.run()
    print(json.dumps({"job": job.name, "outcome": outcome, "log": str(supervisor.driver.log_path)}), flush=True)
    return 0 if outcome == "stopped" else 1
