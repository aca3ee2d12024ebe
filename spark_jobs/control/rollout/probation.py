"""The quarantine rule of a rollout's probation: a new version whose batches quarantine far more than the previous
version's is rolled back (docs/deploying.md).

Both shares come from ``streaming_progress`` (its ``version`` and ``rows`` columns): the quarantine tables' rows over
all the rows the version's batches carried, the previous version's over its newest :data:`PREVIOUS_ROWS` rows. The
rule needs both a ratio and a margin, ``RestartPolicy.quarantine_factor`` and ``quarantine_margin``: a parser that
breaks quarantines most of a batch, while a batch of ordinary bad files moves the share by a few points. No pyspark.
"""

from __future__ import annotations

from spark_jobs.model.jobs import JobSpec

PREVIOUS_ROWS = 50  # the previous version's newest progress rows weighed


def quarantine_share(job: JobSpec, rows: list[dict]) -> tuple[float | None, int]:
    """The quarantine tables' share of the rows ``rows`` (progress rows) carried, and that total (None: no row)."""
    quarantine = {t.name for t in job.tables if t.quarantine}
    total = bad = 0
    for row in rows:
        for table, count in (row.get("rows") or {}).items():
            total += count or 0
            bad += (count or 0) if table in quarantine else 0
    return (bad / total if total else None), total


def quarantine_verdict(job: JobSpec, new: list[dict], previous: list[dict], factor: float,
                       margin: float) -> str | None:
    """Why the new version's quarantine share is far above the previous one's, or None while it is not (or while
    either has carried no row yet)."""
    now, carried = quarantine_share(job, new)
    before, _ = quarantine_share(job, previous[-PREVIOUS_ROWS:])
    if now is None or before is None:
        return None
    if now > factor * before and now > before + margin:
        return (f"its batches quarantined {now:.1%} of {carried} rows, the previous version's {before:.1%} (more than "
                f"{factor:g} times as much and {margin:.0%} more)")
    return None


def probation_rows(lake_root, job: JobSpec, version: str, previous: str | None) -> tuple[list[dict], list[dict]]:
    """The progress rows of ``version`` and of ``previous`` (the version before; None: the checkout's, whatever its
    name), oldest first."""
    from spark_jobs.control.monitoring.history import read_progress

    rows = read_progress(lake_root, job.name, limit=None, days=1, columns=["version", "rows", "timestamp", "batch_id"])
    new = [row for row in rows if row.get("version") == version]
    old = [row for row in rows if row.get("version") != version and (previous is None or row.get("version") == previous)]
    return new, old
