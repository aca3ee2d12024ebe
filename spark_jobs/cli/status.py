"""``python -m spark_jobs status [--lake PATH] [--json]``: every job's health in a terminal.

The same summary as the health page in the Airflow UI (both call
:func:`spark_jobs.control.monitoring.health.check_job`): state, last commit and its age, backlog, the
driver that holds the checkpoint (pid, host, uptime, and whether it is the continuous driver or a catch-up
run), the last batch's freshness (landing to commit), the oldest waiting file's age, the restarts (within the
budget's window and in all, over every supervisor), the warm standby (off, absent, warming, warm; its last take-over),
a continuous job's versions (the running one, the one on probation, the last rollout),
what the supervisor does, the conditions that raise alerts (with what to do) and the
open incidents. No Spark and no Airflow: it reads the checkpoint, the control files and
``streaming_progress`` (delta-rs), in about a second. Exit status 0 whatever the health (it is a
report), 2 for a bad value.

Example::

    JOB             STATE    LAST COMMIT          FRESHNESS  BACKLOG                          DRIVER                        RESTARTS        STANDBY          SUPERVISOR
    cloudtrail_etl  lagging  12 s ago (batch 41)  14 s       312 files, the oldest waited 3 min  pid 4711 on etl-1, up 3 h 5 min (continuous)  1/5 (3 in all)  warm (pid 4790)  running; ...
      owner: the continuous driver pid 4711 on host etl-1 since 2026-11-27T00:02:11.120+00:00 (run ... of ...)
      version: v3
      on probation: v3 (from v2), 1 of 3 batches, 40 of 300 s, since 2026-11-27T03:10:02.114+00:00
      last rollout: v2 -> v4, rolled back at 2026-11-27T02:55:41.020+00:00: version v4 failed on probation: ...
      falling_behind [warning] cloudtrail_etl is falling behind: its last 5 micro-batches processed ...
          do: see which part of the batch duration grew (health page); ...
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone

from spark_jobs.control.monitoring.health import standby_text
from spark_jobs.control.rollout.versions import version_lines
from spark_jobs.control.monitoring.status import (backlog_text, collect, commit_text, driver_text, freshness_text,
                                                  restarts_text)

HELP = "every job's health: state, last commit, backlog, restarts, alerts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--json", action="store_true", help="one JSON object: {lake, checked_at, jobs: [...]}")


def format_table(jobs: list, lake: str) -> str:
    """The terminal view: one line per job, then who owns it, its conditions and open incidents."""
    header = ("JOB", "STATE", "LAST COMMIT", "FRESHNESS", "BACKLOG", "DRIVER", "RESTARTS", "STANDBY", "SUPERVISOR")
    lines = [header] + [(h.job, h.state, commit_text(h), freshness_text(h), backlog_text(h), driver_text(h),
                         restarts_text(h), standby_text(h.standby), h.supervision or "none") for h in jobs]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [f"lake {lake}"]
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
        if index == 0:
            continue
        health = jobs[index - 1]
        if health.reason not in {c.summary for c in health.conditions}:
            out.append(f"  {health.reason}")
        if health.driver and not health.driver.get("expired"):
            out.append(f"  owner: {health.owner}")
        out += [f"  {line}" for line in version_lines(health.version)]
        for condition in health.conditions:
            out.append(f"  {condition.code} [{condition.severity}] {condition.summary}")
            out.append(f"      do: {condition.action}")
        for incident in health.incidents:
            out.append(f"  incident {incident['code']} open since {incident['opened_at']} (alerted)")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from spark_jobs.model.lake import resolve_lake_root

    lake = str(resolve_lake_root(args.lake))
    now = datetime.now(timezone.utc)
    jobs = collect(lake, now)
    if args.json:
        print(json.dumps({"lake": lake, "checked_at": now.isoformat(timespec="seconds"),
                          "jobs": [h.to_dict() for h in jobs]}, default=str))
    else:
        print(format_table(jobs, lake))
    return 0
