"""Pieces the project's DAG files share, declared once: retrying default args, the input-folder Param,
the skip of a lake table no job has written yet, and a catch-up DAG's schedule (its cron, or its landing
folder's Asset with the cron as a safety net).

Imported while Airflow parses DAG files: no I/O, no connection, no pyspark.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Asset, AssetOrTimeSchedule, AssetWatcher, CronDataIntervalTimetable, Param

from spark_jobs.model.jobs import JobSpec


def retrying_default_args(execution_timeout: timedelta) -> dict:
    """Default args of a task that loses nothing when it is killed and rerun (a checkpoint or a Delta
    transaction resumes or redoes it): 2 retries with exponential backoff, a stuck run stopped.

    In Airflow 3.3 ``retry_exponential_backoff`` is the backoff multiplier (a float; the old ``True``
    is read as 2.0), capped by ``max_retry_delay``.

    :param execution_timeout: how long a run may take before it is stopped.
    """
    return {
        "owner": "data-platform",
        "retries": 2,
        "retry_delay": timedelta(minutes=5),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(minutes=30),
        "execution_timeout": execution_timeout,
    }


def input_folder_param(job: JobSpec, reads: str) -> Param:
    """The trigger form's ``input``: an absolute landing folder, or empty (``None``) for the job's default. It may be
    empty: Airflow's form marks a field required, and disables Trigger, unless its type allows ``null`` (the form
    sends an emptied text field as ``null``); templates read it as ``params.input or ''``.

    :param job: the registry job.
    :param reads: what the folder is for, e.g. "to read in this run".
    """
    return Param(
        None,
        type=["null", "string"],
        pattern="^(/.*)?$",
        title="Input folder",
        description=f"Absolute landing folder {reads}. Empty: ${job.input_env_var}, else the registry's "
                    f"default_input.",
    )


def skip_unwritten_table(table: str):
    """A ``pre_execute`` hook: the task is skipped (no spark-submit, no JVM) when ``table`` has no data yet
    in the worker's lake (``$LAKE_ROOT``): a job that has not run yet has nothing to compact or vacuum.

    Runs when the task runs, never while the DAG file is parsed.
    """

    def check(context) -> None:
        from airflow.sdk.exceptions import AirflowSkipException

        from spark_jobs.model.lake import Lake

        path = Lake.at(None).table_path(table)
        if not (path / "_delta_log").is_dir():
            raise AirflowSkipException(f"table {table} has no data yet at {path} (its job has not run): nothing to do")

    return check


def landing_asset(job: JobSpec) -> Asset:
    """The Asset ``<job>_landing``: the job's input landing, watched by
    :class:`~streaming.triggers.landing_files.LandingFilesTrigger` (an event each time new files are listed).

    Its identity holds no path (like the table Assets): the folder is the triggerer's ``$<JOB>_INPUT``, else
    the registry's ``default_input``, resolved when the watcher starts.
    """
    from streaming.triggers.landing_files import LandingFilesTrigger

    trigger = LandingFilesTrigger(job=job.name, poll_seconds=float(job.catchup.poll_seconds),
                                  coalesce_seconds=float(job.catchup.coalesce_seconds))
    return Asset(name=f"{job.name}_landing", watchers=[AssetWatcher(name=f"{job.name}_landing_files", trigger=trigger)])


def catchup_schedule(job: JobSpec):
    """The schedule of ``<job>_catchup``, as the registry entry's ``catchup`` chooses.

    ``cron``: :class:`CronDataIntervalTimetable` on ``job.schedule`` (runs of data intervals: a backfill run
    selects its files by its interval; a plain cron string would be Airflow 3's CronTriggerTimetable, whose
    runs have no interval). ``data``: :class:`AssetOrTimeSchedule`: a run when the landing Asset gets an event
    (:func:`landing_asset`), and the same cron as a safety net (files the watcher missed, e.g. while the
    triggerer was down, are read by the next scheduled run; Airflow's backfill still works on its intervals).
    """
    cron = CronDataIntervalTimetable(job.schedule, timezone="UTC")
    if job.catchup.on == "data":
        return AssetOrTimeSchedule(timetable=cron, assets=landing_asset(job))
    return cron
