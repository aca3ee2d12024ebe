"""Whether an available-now run of a job has provably nothing to do, decided without starting Spark.

A catch-up DAG runs its job every hour (or every few minutes), and most of those runs find nothing
new. Spark cannot say so without a SparkSession, Delta's table snapshots and a streaming query's
start (~8-12 s of JVM time on 2 cores), and Spark has no "dry" trigger that answers from the
checkpoint alone. The checkpoint inspection (:mod:`spark_jobs.control.checkpoint.inspect`) already computes
the file source's backlog the way Spark would (the same listing rules, the source log's seen files,
``maxFileAge``), so the runner asks it first and skips Spark only when every condition below holds;
any doubt starts Spark as before:

- the trigger is ``available-now``, the job reads files (not Kafka or a Delta table) and keeps no
  state (a stateful query may have timers or a watermark to move even without new input);
- it is the job's own stream (not a backfill writer or a date or time window) with the registry's
  file-source options (no command-line overrides the inspection would not see);
- the checkpoint has committed at least one batch, has no batch in flight and reports no problem of
  any severity (damage, a table ahead of it, files too old to be read, another input folder);
- every table of the job is a readable Delta table;
- no input file is waiting: in notification mode (``--queue-url``, ``$<JOB>_QUEUE_URL``) that is the queue's
  answer, not the bucket's (the run reads only the queue: a message waiting always starts Spark, a file that
  landed without a message is the reconcile's); otherwise the bounded listing of the window.

No pyspark here: the runner calls it before it builds a SparkSession.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.model.jobs import JobSpec

if TYPE_CHECKING:
    from spark_jobs.model.runs import RunOptions


def nothing_to_do(job: JobSpec, options: "RunOptions") -> str | None:
    """Why this run can end without Spark (one line for the log and the run's summary), or ``None``.

    :param job: the registry entry.
    :param options: the run's options, as :func:`spark_jobs.driver.runner.run_streaming` gets them.
    """
    if not options.trigger.available_now or not job.source.lands_files or job.stateful:
        return None
    if options.writer or options.file_dates is not None or options.file_times is not None:
        return None
    if dict(options.file_source_options) != dict(job.file_source_options):
        return None
    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

    queue_url = None
    if job.discovers_files:
        from spark_jobs.control.discovery.settings import run_settings

        queue_url = run_settings(job, options).queue_url or ""  # the run's own: its flag or $<JOB>_QUEUE_URL
    try:
        report = inspect_checkpoint(job, options.lake.root, options.input_path, queue_url=queue_url)
    except Exception:  # noqa: BLE001 - whatever the inspection cannot read, Spark decides
        return None
    committed = report.latest_commit_batch
    if committed is None or report.batch_in_flight is not None or report.problems:
        return None
    if any(table.format != "delta" or table.error for table in report.table_progress):
        return None
    if report.backlog_files != 0 or report.in_flight_files:
        return None
    queue = (report.discovery or {}).get("queue")
    if queue:
        held = int(queue.get("in_flight") or 0)
        return (f"nothing new: the queue {queue['queue_url']} holds no message waiting"
                + (f" ({held} received by an earlier driver come back after their visibility timeout, for the next "
                   "run)" if held else "")
                + f"; {report.ingested_files} file(s) of {report.input} ingested (checkpoint batch {committed} "
                  "committed, none in flight); Spark was not started")
    return (f"nothing new: no input file waits under {report.input} ({report.ingested_files} file(s) ingested, "
            f"checkpoint batch {committed} committed, none in flight); Spark was not started")
