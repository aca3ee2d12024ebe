"""``python -m spark_jobs standby JOB [on|off|default]``: a continuous job's warm standby, shown or switched.

Without a switch it prints the setting in force (and who made it) and the standby's state now (``off``,
``absent``, ``warming``, ``warm``, its last take-over). With one it keeps the standby on or off for every later
run (``<lake>/control/<job>/settings.json``, :mod:`spark_jobs.control.supervision.job_settings`), or goes back to
the registry's ``RestartPolicy.warm_standby``; a running supervisor follows within seconds. In Airflow the same
switch is the on-call action ``set_warm_standby`` (audited).

Examples::

    python -m spark_jobs standby cloudtrail_etl
    python -m spark_jobs standby cloudtrail_etl off --by alice
"""

from __future__ import annotations

import argparse
import getpass

from spark_jobs.registry import JOBS, get_job

HELP = "show or switch a continuous job's warm standby (kept for every later run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help=f"a registered job: {', '.join(j for j, s in JOBS.items() if s.continuous_trigger)}")
    parser.add_argument("switch", nargs="?", choices=("on", "off", "default"),
                        help="on / off from now on, or default: the registry's RestartPolicy.warm_standby")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--by", help="who switches it (default: this user's login name)")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.control.monitoring.health import standby_text, standby_view
    from spark_jobs.control.supervision.job_settings import parse_switch, set_warm_standby, warm_standby
    from spark_jobs.control.supervision.state import read_supervisor_state
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.lake import Lake

    job = get_job(args.job)
    if not job.continuous_trigger:
        raise UsageError(f"job {job.name!r} has no continuous trigger, so no supervisor and no standby; one of "
                         f"{', '.join(j for j, s in JOBS.items() if s.continuous_trigger)}")
    control = str(Lake.at(args.lake).control_path(job.name))
    if args.switch is not None:
        set_warm_standby(control, parse_switch(args.switch), args.by or getpass.getuser())
    print(f"{job.name}: warm standby {warm_standby(job, control).describe()}")
    print(f"  now: {standby_text(standby_view(read_supervisor_state(control)))}")
    return 0
