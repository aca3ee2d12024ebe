"""What one run of a ``<job>_catchup`` DAG spark-submits: the live job, or one backfilled data interval.

- A scheduled or manual run processes everything new on the job's **live checkpoint**:
  ``run <job> --trigger available-now [--input DIR] [--max-files-per-trigger N] [--start-at T]`` (``--start-at``:
  a new checkpoint of a job that discovers its files skips the history delivered before ``T``).
- A run of **Airflow's own backfill** (``airflow backfill create``, the UI's Backfill dialog;
  ``dag_run.run_type == "backfill"``) loads the files *delivered in its data interval*
  ``[data_interval_start, data_interval_end)`` (by the job's key layout: the CloudTrail object name's timestamp,
  else midnight of the ``YYYY/MM/DD`` folders) as a writer of its own, with a
  checkpoint per interval: ``backfill <job> --source DIR --time-from START --time-to END``. A run
  whose interval holds no file ends here, without a spark-submit.

No pyspark (Airflow's ``plan`` task imports it). A form-supplied ``input`` is checked like a
backfill's source (:func:`spark_jobs.control.catchup.backfill.check_source`: under the job's input roots, no
``..``, no symlink out of a root, no shell metacharacters) before it reaches spark-submit.
"""

from __future__ import annotations

import datetime as dt

from spark_jobs.control.catchup.backfill import BackfillRefused, check_request, check_source, list_files
from spark_jobs.model import inputs
from spark_jobs.registry import get_job

BACKFILL_RUN_TYPE = "backfill"


def job_input(job_name: str, given: str | None) -> str:
    """The folder a run reads: the form's ``input``, else ``$<JOB>_INPUT``, else the registry's default."""
    return str(inputs.input_path(get_job(job_name), given))


def plan_run(job_name: str, input_path: str | None, max_files_per_trigger: int | None, run_type: str,
             interval: tuple[dt.datetime, dt.datetime] | None, start_at: str | None = None) -> dict:
    """What one catch-up run does: the arguments of ``python -m spark_jobs``, ``None`` when nothing is to do.

    :param job_name: the registry job.
    :param input_path: the form's ``input`` (empty: the job's default input).
    :param max_files_per_trigger: the form's files per micro-batch (``None``: the registry's).
    :param run_type: the DAG run's type (``scheduled``, ``manual``, ``backfill``, ...).
    :param interval: the run's data interval (used by backfill runs).
    :param start_at: the form's start (``now`` or an ISO-8601 time): a first run of a job that discovers its
        files skips what was delivered before it (a live run only).
    :returns: ``{"kind": "live"|"backfill", "args": [...] or None, ...}`` (a backfill run also says its
        writer and the listing); ``args`` is ``None`` for a backfill run whose interval holds no file.
    :raises BackfillRefused: a bad ``input`` (field ``input``), or a backfill run without a data interval.
    """
    job = get_job(job_name)
    run_type = str(getattr(run_type, "value", run_type))
    if input_path:
        try:
            input_path = str(check_source(job, input_path))
        except BackfillRefused as exc:
            raise BackfillRefused("input", str(exc).split(": ", 1)[1]) from None
    if run_type != BACKFILL_RUN_TYPE:
        folder = job_input(job.name, input_path)
        if job.source.lands_files and not inputs.input_path(job, folder).is_dir():  # fails in a second, not after a JVM start (the next run tries again)
            raise BackfillRefused("input", f"the input folder {folder} does not exist (set ${job.input_env_var} or "
                                           "the run's input)")
        args = ["run", job.name, "--trigger", "available-now"]
        if input_path:
            args += ["--input", input_path]
        if max_files_per_trigger is not None:
            args += ["--max-files-per-trigger", str(int(max_files_per_trigger))]
        if start_at:
            args += ["--start-at", _start_at(job, start_at)]
        return {"kind": "live", "args": args}
    if interval is None or None in interval:
        raise BackfillRefused("data_interval", "a backfill run needs a data interval (a DAG with a time-based schedule)")
    source = job_input(job.name, input_path)
    try:
        request = check_request(job.name, source, None, None, max_files_per_trigger, time_from=interval[0],
                                time_to=interval[1])
    except BackfillRefused as exc:
        raise BackfillRefused("input" if exc.field == "source" else exc.field, str(exc).split(": ", 1)[1]) from None
    listing = list_files(request)
    summary = {"kind": "backfill", "writer": request.writer, "source": str(request.source),
               "time_from": interval[0].isoformat(), "time_to": interval[1].isoformat(), **listing.summary()}
    return {**summary, "args": request.cli_args() if listing.files else None}


def _start_at(job, value: str) -> str:
    """The form's start, checked: ``now`` or an ISO-8601 time, for a job that discovers its files.

    :raises BackfillRefused: (field ``start_at``) otherwise.
    """
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.times import parse_utc, utc_iso

    if not job.discovers_files:
        raise BackfillRefused("start_at", f"{job.name} does not discover its files by a key layout: it has no start")
    if value.strip().lower() == "now":
        return "now"
    try:
        return utc_iso(parse_utc(value, "start_at"))
    except UsageError as exc:
        raise BackfillRefused("start_at", str(exc)) from None
