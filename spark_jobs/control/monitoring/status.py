"""Every job's health for people: collected for all jobs, and the short texts of its parts.

Shared by ``python -m spark_jobs status`` (:mod:`spark_jobs.cli.status`) and the health page in the Airflow UI;
both show :func:`spark_jobs.control.monitoring.health.check_job`'s summary. No Spark and no Airflow.
"""

from __future__ import annotations

from datetime import datetime, timezone

from spark_jobs.registry import JOBS


def collect(lake: str | None = None, now: datetime | None = None) -> list:
    """Every registry job's :class:`~spark_jobs.control.monitoring.health.JobHealth`, in registry order."""
    from spark_jobs.control.monitoring.health import check_job

    now = now or datetime.now(timezone.utc)
    return [check_job(job, lake, now=now) for job in JOBS.values()]


def age_text(seconds: float | None) -> str:
    """``12 s ago``, ``4 min ago``, ``3 h 12 min ago``, ``2 d 4 h ago``; ``never`` for None."""
    from spark_jobs.control.monitoring.health import duration_text

    return "never" if seconds is None else f"{duration_text(round(seconds))} ago"


def driver_text(health) -> str:
    """The live driver in a table cell: ``pid 4711 on host h, up 12 min (continuous)``; ``-`` without one."""
    from spark_jobs.control.checkpoint.lease import LeaseInfo
    from spark_jobs.control.monitoring.health import duration_text
    from spark_jobs.control.supervision.ownership import lease_owner

    driver = health.driver
    if not driver or driver.get("expired"):
        return "-"
    owner = lease_owner(LeaseInfo.from_dict(driver))
    up = (datetime.fromisoformat(health.checked_at) - datetime.fromisoformat(owner.since)).total_seconds()
    return f"pid {owner.pid} on {owner.host}, up {duration_text(up)} ({owner.kind})"


def commit_text(health) -> str:
    if health.last_commit_time is None:
        return "never"
    return f"{age_text(health.last_commit_age_seconds)} (batch {health.latest_commit_batch})"


def restarts_text(health) -> str:
    """``1/5 (3 in all)``: restarts within the budget's window, over all supervisors (an on-call restart or a new
    DAG run starts a new one), of the budget; then all time. ``-`` for a job with no continuous trigger."""
    counts = health.restarts
    if counts is None:
        return "-"
    return f"{counts['in_window']}/{health.max_restarts or '?'} ({counts['all_time']} in all)"


def size_text(size: int) -> str:
    """``512 B``, ``3.4 KiB``, ``12.0 MiB``, ``1.5 GiB`` (binary units, as ``du -h``)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def backlog_text(health) -> str:
    """``12 files (3.4 MiB), the oldest waited 3 min``; ``?`` when unknown, ``-`` for a job that never ran."""
    if health.backlog_files is None:
        return "-" if health.state == "not_started" else "?"
    text = f"{health.backlog_files} file{'s' if health.backlog_files != 1 else ''}"
    if health.backlog_files and health.backlog_bytes is not None:
        text += f" ({size_text(health.backlog_bytes)})"
    if health.backlog_files and health.backlog_age_seconds is not None:
        from spark_jobs.control.monitoring.health import duration_text

        text += f", the oldest waited {duration_text(health.backlog_age_seconds)}"
    return text


def freshness_text(health) -> str:
    """The last batch's landing to commit: ``8 s``; ``-`` when unknown."""
    from spark_jobs.control.monitoring.health import duration_text

    seconds = health.freshness_seconds
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 60 else duration_text(seconds)


