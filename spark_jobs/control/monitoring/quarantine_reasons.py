"""A job's quarantined records by table and reason, counted in its quarantine Delta tables, for the health page,
``python -m spark_jobs status`` and the Prometheus metrics (through :class:`~.health.JobHealth`).

The quarantine tables are the truth of what was quarantined: a record is there once (their unique key is its place
and reason), whichever driver, backfill or reprocess put it there. Counting them, rather than keeping a counter of
our own in each writer, keeps the figure exact across crashes and replays. Only the ``reason`` column is read
(delta-rs, one dictionary-encoded Parquet column), and only when a table's Delta version moved since the last
count: a long-lived reader such as the API server's metrics endpoint, scraped every few seconds, re-reads nothing
while the table stands still. The reason codes are a short, fixed list per log type (the ``detail`` column carries
the free text), so they are fit for a metric label.

A local lake's only, as the health checks' progress rows. No pyspark here.
"""

from __future__ import annotations

import threading
from pathlib import Path

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake

REASON = "reason"

# table path -> ((its Delta version, that commit's mtime: a table made anew at the same path), reason -> records)
_counted: dict[str, tuple[tuple[int, int], dict[str, int]]] = {}
_lock = threading.Lock()


def reason_counts(path: str | Path) -> dict[str, int]:
    """The records of one quarantine table of a local lake by reason (``{}`` when the table does not exist yet)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    key = str(path)
    if not (Path(path) / "_delta_log").is_dir():
        return {}
    try:
        table = DeltaTable(key, without_files=True)
    except TableNotFoundError:  # a log with no commit yet
        return {}
    version = table.version()
    stamp = (version, (Path(path) / "_delta_log" / f"{version:020d}.json").stat().st_mtime_ns)
    with _lock:
        known = _counted.get(key)
    if known and known[0] == stamp:
        return dict(known[1])
    table = DeltaTable(key, version=version)
    reasons = table.to_pyarrow_dataset().to_table(columns=[REASON]).group_by(REASON).aggregate([(REASON, "count")])
    counts = {str(reason): int(n) for reason, n in zip(reasons[REASON].to_pylist(),
                                                       reasons[f"{REASON}_count"].to_pylist()) if reason is not None}
    with _lock:
        _counted[key] = (stamp, counts)
    return dict(counts)


def quarantine_reasons(job: JobSpec, lake: Lake) -> dict[str, dict[str, int]]:
    """Each quarantine table of ``job`` with its records by reason, most first."""
    found = {}
    for table in job.tables:
        if table.quarantine:
            counts = reason_counts(lake.table_path(table.name))
            found[table.name] = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return found


def reasons_text(found: dict[str, dict[str, int]] | None) -> str | None:
    """``cloudtrail_quarantine: invalid_json 3, bad_event_time 1``; None when nothing is quarantined."""
    parts = [f"{table}: " + ", ".join(f"{reason} {n}" for reason, n in counts.items())
             for table, counts in (found or {}).items() if counts]
    return "; ".join(parts) or None
