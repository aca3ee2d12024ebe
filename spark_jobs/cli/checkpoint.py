"""``python -m spark_jobs checkpoint {inspect,repair} JOB``: the checkpoint's health and its doctor.

Examples::

    python -m spark_jobs checkpoint inspect cloudtrail_etl                 # for people
    python -m spark_jobs checkpoint inspect cloudtrail_etl --json          # one JSON object
    python -m spark_jobs checkpoint inspect cloudtrail_etl --lake memory://lake --input /data/landing
    python -m spark_jobs checkpoint repair cloudtrail_etl                  # dry run: what would be done
    python -m spark_jobs checkpoint repair cloudtrail_etl --apply          # back up, then fix what is safe

Exit status: ``inspect`` 0 whatever the health (it is a report); ``repair`` 0 nothing left for a
person, 1 something was refused (the reason and the way out are printed), 3 a live driver holds the
checkpoint; both 2 for a bad value (unknown job, missing --input folder).
"""

from __future__ import annotations

import argparse
import json
import os

from spark_jobs.control.discovery.backlog import discovery_text
from spark_jobs.model.errors import UsageError
from spark_jobs.registry import JOBS, get_job


HELP = "a job's checkpoint: inspect its health, repair damage"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``checkpoint`` command's sub-commands."""
    actions = parser.add_subparsers(dest="checkpoint_command", required=True)
    for name, text in (("inspect", "the checkpoint's health: batches, backlog, driver, problems (no Spark)"),
                       ("repair", "fix what is provably safe in a damaged checkpoint (a dry run unless --apply)")):
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
        sub.add_argument("--lake", help="lake root, a path or an fsspec URL (default: $LAKE_ROOT or ./lake)")
        sub.add_argument("--input", help="landing folder, for the backlog (default: as `run` resolves it)")
        sub.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "repair":
            sub.add_argument("--apply", action="store_true",
                             help="back the checkpoint up and make the safe repairs (default: only say what they are)")


def run(args: argparse.Namespace) -> int:
    """Run ``checkpoint inspect|repair`` for parsed ``args``; returns the exit status."""
    job = get_job(args.job)
    if args.input and "://" not in args.input and not os.path.isdir(args.input):
        raise UsageError(f"--input {args.input!r} is not a folder; pass the landing folder the job reads")
    if args.checkpoint_command == "inspect":
        from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

        report = inspect_checkpoint(job, args.lake, args.input)
        print(json.dumps(report.to_dict(), sort_keys=False) if args.json else format_report(report.to_dict()))
        return 0
    from spark_jobs.control.checkpoint.repair import repair_checkpoint

    result = repair_checkpoint(job, args.lake, apply=args.apply, input_path=args.input)
    print(json.dumps(result.to_dict()) if args.json else format_repair(result.to_dict()))
    return result.exit_code


STATUS_WORDS = {
    "not_started": "no checkpoint yet",
    "idle": "no driver running; it can start from here",
    "healthy": "a driver is running and keeping up",
    "in_flight": "a driver is running a batch",
    "lagging": "a driver is running but the input is piling up",
    "stalled": "the driver is paused, hung or making no progress",
    "dead": "the driver is gone without releasing its lease",
    "corrupt": "damaged: Spark cannot start from it safely (see problems)",
}


def _batches(report: dict) -> str:
    planned, committed = report["latest_offset_batch"], report["latest_commit_batch"]
    if planned is None and committed is None:
        return "none yet"
    text = f"planned {planned if planned is not None else 'none'}, committed {committed if committed is not None else 'none'}"
    if report["last_commit_time"]:
        text += f" (last commit {report['last_commit_time']})"
    if report["batch_in_flight"] is not None:
        text += f"; batch {report['batch_in_flight']} in flight"
    return text


def _table_batch(table: dict) -> str:
    if table["batch"] is not None:
        return f"holds batches up to {table['batch']}"
    if table["format"] == "delta" and not table["app_id"]:
        return "batches unknown (no query id)"
    return "holds no batch of this stream" if table["format"] in ("delta", "file_sink") else "not there"


def _driver(driver: dict | None) -> str:
    if not driver:
        return "none (no lease held)"
    alive = {True: "process running", False: "process gone", None: "on another host"}[driver["alive"]]
    state = "EXPIRED" if driver["expired"] else "live"
    return (f"pid {driver['pid']} on {driver['host']}, started {driver['started_at']}, heartbeat "
            f"{driver['heartbeat_age_seconds']} s ago (ttl {driver['ttl_seconds']:g} s): {state}, {alive}")


def _supervisor(state: dict | None) -> str:
    if not state:
        return "none"
    text = f"{state.get('state')}, {state.get('consecutive_failures', 0)} consecutive failures"
    text += f", {state.get('restarts_in_window', 0)}/{state.get('max_restarts')} restarts in {state.get('window_seconds')} s"
    if state.get("is_backing_off"):
        text += f", backing off until {state.get('next_attempt_at')}"
    if state.get("last_reason"):
        text += f"; last: {state['last_reason']}"
    return text


def _backlog(report: dict) -> str:
    backlog, table = report["backlog_files"], report.get("source_table")
    if backlog is None:
        return "backlog unknown"
    lag = report.get("consumer_lag")
    if lag:
        parts = ", ".join(f"{p['topic']}/{p['partition']} {p['lag']}" for p in lag["partitions"])
        return (f"{backlog} messages behind the brokers' latest offsets ({parts}), the oldest waiting "
                f"{lag['max_lag_seconds']:.0f} s, {report['in_flight_files']} in flight")
    if table:
        return (f"{backlog} data files in {table['backlog_versions']} versions waiting (table version "
                f"{table['latest_version']}, read up to {table['read_version']}), {report['in_flight_files']} in flight")
    return f"{backlog} files waiting, {report['in_flight_files']} in flight, {report['ingested_files']} ingested"


def format_report(report: dict) -> str:
    """The inspection for people."""
    backlog = report["backlog_files"]
    lines = [
        ("checkpoint", report["checkpoint"]),
        ("status", f"{report['status']}: {STATUS_WORDS.get(report['status'], '')}"),
        ("query id", report["query_id"] or "unknown"),
        ("batches", _batches(report)),
        ("input", f"{report['input']}: " + _backlog(report)),
        ("discovery", discovery_text(report.get("discovery"))),
        ("watermark", (report["watermark"] or {}).get("batch_watermark") or "none"),
        ("state", ", ".join(f"operator {o['id']} {'/'.join(o['names']) or ''} {o['partitions']} partitions, "
                            f"version {o['latest_version']}" for o in report["state"]["operators"])
         or "no stateful operators"),
        ("tables", "; ".join(f"{name}: {t['format']}, {_table_batch(t)}" for name, t in report["tables"].items()
                             if isinstance(t, dict) and "format" in t) or "none"),
        ("driver", _driver(report["driver"])),
        ("supervisor", _supervisor(report["supervisor"])),
    ]
    out = [f"{key:<11} {value}" for key, value in lines if value is not None]
    if not report["problems"]:
        out.append(f"{'problems':<11} none")
    else:
        out.append(f"{'problems':<11} {len(report['problems'])}")
        for problem in report["problems"]:
            out.append(f"  [{problem['severity']}] {problem['code']}: {problem['explanation']}")
            out.append(f"      action: {problem['action']}")
    return "\n".join(out)


def format_repair(result: dict) -> str:
    """The doctor's plan or outcome for people."""
    out = [f"checkpoint {result['checkpoint']} ({result['status_before']})"]
    if result["blocked_by"]:
        out.append(f"refused: {result['blocked_by']}")
        return "\n".join(out)
    verb = "done" if result["applied"] else "would do (dry run; --apply to do it)"
    if result["backup"]:
        out.append(f"backup: {result['backup']}")
    if result["actions"]:
        out.append(f"{verb}:")
        for action in result["actions"]:
            out.append(f"  {action['action']} {', '.join(action['files'])}  [{action['code']}]")
            out.append(f"      why it is safe: {action['why']}")
    else:
        out.append("nothing to repair")
    for item in result["nothing_needed"]:
        out.append(f"no repair needed [{item['code']}]: {item['why']}")
    for item in result["refused"]:
        out.append(f"REFUSED [{item['code']}]: {item['reason']}")
        out.append(f"      way out: {item['way_out']}")
    for action in result.get("pending") or []:
        out.append(f"still to do [{action['code']}]: {action['action']} {', '.join(action['files'])}")
    if result["status_after"]:
        out.append(f"status now: {result['status_after']}")
    return "\n".join(out)
