"""Which version a continuous job runs, which one is on probation and how far, and how its last rollout ended: the
health page's and ``status``'s version lines (docs/deploying.md). No pyspark here.

Read from what the supervisor already keeps: the lease's ``version`` (the driver that holds the checkpoint names its
code), ``rollout.json`` (the rollout under way, or the last one) and ``rollouts/`` (the earlier ones). A rollout on
probation counts its batches as the supervisor does: the checkpoint's newest committed batch after the last one the
old version committed (``batch_before``).
"""

from __future__ import annotations

from datetime import datetime

import fsspec

from spark_jobs.control.rollout.request import ACTIVE, HISTORY, read_rollout
from spark_jobs.control.supervision.state import read_json
from spark_jobs.model.jobs import JobSpec


def last_ended(control: str) -> dict | None:
    """The newest rollout that ended (``rollout.json`` when it has, else the newest of ``rollouts/``), or None."""
    current = read_rollout(control)
    if current and current.get("phase") not in ACTIVE:
        return current
    fs, base = fsspec.core.url_to_fs(str(control))
    try:
        names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{base.rstrip('/')}/{HISTORY}", detail=False))
    except FileNotFoundError:
        return None
    return read_json(f"{control}/{HISTORY}", names[-1]) if names else None  # ids begin with their time


def version_view(job: JobSpec, control: str, driver: dict | None, latest_batch: int | None,
                 now: datetime) -> dict | None:
    """The job's versions: ``running`` (the live lease's ``version``), ``probation`` (version, from, batches and
    seconds so far and needed), ``under_way`` (a rollout in another phase), ``last`` (the last ended rollout: version,
    phase, when, outcome); None for a job without a continuous trigger."""
    if not job.continuous_trigger:
        return None
    live = driver is not None and not driver.get("expired") and not driver.get("released")
    view: dict = {"running": ((driver or {}).get("details") or {}).get("version") if live else None,
                  "probation": None, "under_way": None, "last": None}
    current = read_rollout(control)
    if current and current.get("phase") == "probation":
        before = current.get("batch_before")
        since = current.get("handed_over_at")
        view["probation"] = {
            "version": current.get("version"), "from": current.get("previous_version") or current.get("from_version"),
            "since": since, "asked_by": current.get("by"),
            "batches": None if latest_batch is None else max(0, latest_batch - (before if before is not None else -1)),
            "batches_needed": job.restart.probation_batches,
            "seconds": round((now - datetime.fromisoformat(since)).total_seconds()) if since else None,
            "seconds_needed": job.restart.probation_seconds}
    elif current and current.get("phase") in ACTIVE:
        view["under_way"] = {"version": current.get("version"), "phase": current.get("phase"),
                             "asked_by": current.get("by"), "destructive": bool(current.get("destructive"))}
    ended = last_ended(control)
    if ended:
        view["last"] = {"id": ended.get("id"), "version": ended.get("version"), "from": ended.get("from_version"),
                        "phase": ended.get("phase"), "ended_at": ended.get("ended_at"), "outcome": ended.get("outcome"),
                        "destructive": bool(ended.get("destructive"))}
    return view


def version_lines(view: dict | None) -> list[str]:
    """The view in words, one line each: the running version, the one on probation, a rollout under way, the last."""
    if not view:
        return []
    lines = [f"version: {view['running'] or 'unknown (no live driver names one)'}"]
    probation = view.get("probation")
    if probation:
        batches = "?" if probation["batches"] is None else probation["batches"]
        seconds = "?" if probation["seconds"] is None else probation["seconds"]
        lines.append(f"on probation: {probation['version']} (from {probation['from'] or 'the checkout'}), "
                     f"{batches} of {probation['batches_needed']} batches, {seconds} of "
                     f"{probation['seconds_needed']:g} s, since {probation['since']}")
    under_way = view.get("under_way")
    if under_way:
        kind = "destructive rollout" if under_way["destructive"] else "rollout"
        lines.append(f"{kind} under way: {under_way['version']}, phase {under_way['phase']} (asked by "
                     f"{under_way['asked_by']})")
    last = view.get("last")
    if last:
        kind = "destructive rollout" if last["destructive"] else "rollout"
        lines.append(f"last {kind}: {last['from'] or 'the checkout'} -> {last['version']}, "
                     f"{last['phase'].replace('_', ' ')} at {last['ended_at'] or '?'}: {last['outcome'] or ''}"[:400])
    return lines
