"""The runs of a job's catch-up and backfill DAGs, for the timeline: what each loaded, or why it failed.

``<lake>/control/<job>/runs.jsonl``: one JSON line per try of a run that ended (appended by the Airflow task that
ran it: :class:`streaming.operators.job_submit.JobSubmitOperator`, and the tasks that refuse a run before it
starts): when, which DAG run and try, who triggered it, ``outcome`` (``succeeded``, ``failed``, ``retrying``,
``refused``), and either what it
loaded (input ``files``, ``rows`` per table and micro-``batches``, summed from the stream's ``streaming_progress``
rows since the try started: :func:`loaded_since`) or the ``reason`` it failed (the driver's own ``error:`` line,
else the error). The driver records its batches whatever started it; this file adds what only the scheduler
knows (which run, which try, failed before any batch). No pyspark, no Airflow.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

from spark_jobs.control.supervision.state import append_line, read_lines

RUNS_FILE = "runs.jsonl"
KINDS = ("catch-up", "backfill")
OUTCOMES = ("succeeded", "failed", "retrying", "refused")


@dataclass
class RunRecord:
    """One try of a catch-up or backfill run that ended.

    :param job: the registry job.
    :param kind: ``catch-up`` (the live checkpoint) or ``backfill`` (a writer of its own).
    :param dag_id: the DAG.
    :param run_id: the DAG run.
    :param try_number: the task's try.
    :param outcome: ``succeeded``, ``failed`` (for good), ``retrying`` (failed; Airflow tries again) or ``refused``
        (a request checked and not run: nothing was tried).
    :param started_at: when the try started (ISO UTC).
    :param stream: the stream it wrote (``job``, or ``job@writer`` for a backfill).
    :param files: input files its micro-batches read.
    :param rows: rows its micro-batches carried, per table.
    :param batches: its micro-batches.
    :param reason: why it failed or was refused.
    :param requested_by: the Airflow user who triggered the run (``None``: the scheduler's or the asset's).
    """

    job: str
    kind: str
    dag_id: str
    run_id: str
    try_number: int
    outcome: str
    started_at: str | None = None
    stream: str | None = None
    files: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    reason: str | None = None
    requested_by: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown run kind {self.kind!r}; one of {', '.join(KINDS)}")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown run outcome {self.outcome!r}; one of {', '.join(OUTCOMES)}")


def record_run(control: str, record: RunRecord) -> dict:
    """Append ``record`` to ``<control>/runs.jsonl`` (``time``: now); returns the line written."""
    return append_line(control, RUNS_FILE, asdict(record))


def read_runs(control: str) -> list[dict]:
    """Every recorded run of the job, oldest first."""
    return read_lines(control, RUNS_FILE)


def loaded_since(lake_root: str, stream: str, since: dt.datetime, now: dt.datetime | None = None) -> dict:
    """What the micro-batches of ``stream`` that started at or after ``since`` loaded, from ``streaming_progress``:
    ``{"files", "rows": {table: n}, "batches"}``. One driver at a time writes a stream (its lease), so after a run
    these are the run's batches."""
    from spark_jobs.control.monitoring.history import read_progress

    now = now or dt.datetime.now(dt.timezone.utc)
    days = (now - since).total_seconds() / 86400 + 1  # whole date partitions from the run's first day on
    rows = read_progress(lake_root, stream, limit=None, days=days, now=now,
                         columns=["batch_id", "timestamp", "input_files", "rows"])
    mine = [r for r in rows if r["timestamp"] is not None and r["timestamp"] >= since]
    totals: dict[str, int] = {}
    for row in mine:
        for table, count in (row.get("rows") or {}).items():
            totals[table] = totals.get(table, 0) + int(count)
    return {"files": sum(r.get("input_files") or 0 for r in mine), "rows": totals, "batches": len(mine)}

