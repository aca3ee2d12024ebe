"""
# Catch-up DAGs: one per registered Spark job

Each job in `spark_jobs.registry.JOBS` gets a DAG `<job>_catchup` that runs on the job's `schedule`
and spark-submits the job once with the **available-now** trigger: every file that landed since
the last run is processed, then the job stops. A job whose registry entry says `catchup=CatchupTrigger(on="data")`
also runs when its input lands: an Asset `<job>_landing` whose watcher lists the landing folder every
`poll_seconds` fires on new files, and the scheduler starts one run for all events queued (a burst is one or
two runs, never two at once: `max_active_runs=1`); its cron stays as a safety net (`AssetOrTimeSchedule`). The job's checkpoint makes this exactly-once: a
run with no new files writes nothing, and a run that was killed is resumed by the next one.

The task runs:

    spark-submit --master <spark_default's host> --conf <Delta's extension and catalog, the class archive> \\
        --jars <project>/.jars/delta-spark...jar,... --name <job> <project>/spark_jobs/__main__.py \\
        run <job> --trigger available-now [--input DIR] [--max-files-per-trigger N]

A `plan` task decides what the run spark-submits (`spark_jobs.control.catchup.plan`): a scheduled or
manual run the command above; a run of **Airflow's own backfill** (`airflow backfill create
--dag-id <job>_catchup --from-date ... --to-date ...`, or the UI's Backfill dialog) loads only the
files *delivered in its data interval* (the CloudTrail object name's timestamp), as a writer with a
checkpoint of its own per interval (`backfill <job> --source DIR --time-from START --time-to END`),
so the live checkpoint is left alone; a backfill run whose interval holds no file ends at `plan`
(`spark_submit` skipped). Several backfill runs may run at once (`--max-active-runs`): each has its
own checkpoint, and the tables keep one row per event.

**While `<job>_continuous` runs, it owns the job**: a scheduled, manual or data-triggered run whose checkpoint
the continuous driver holds (or whose continuous supervisor is active: starting, backing off, waiting) ends at
`plan` as a success that says so ("cloudtrail_etl is owned by the continuous driver pid N on host H since T; its
files are ingested there", also in XCom `owned_by`): `spark_submit` is skipped, no retry, no failed run. A run
whose spark-submit still loses the race for the lease (exit status 3) to the continuous driver is skipped the same
way. A catch-up run that holds the lease when the continuous driver starts is waited for by the supervisor (not a
failed restart). Every try of `spark_submit` that ends, and a refused `plan`, is a line of the job's run record
(`<lake>/control/<job>/runs.jsonl`: rows and files loaded, or the reason it failed), shown on the job's timeline.

`max_active_runs=1` because two runs on one checkpoint must never overlap. spark-submit inherits
the worker's environment (the Makefile's: `PATH` with `spark-submit`, `PYSPARK_PYTHON`, `LAKE_ROOT`,
`<JOB>_INPUT`), and the `spark_default` connection names the master. Each table the job writes is
an outlet Asset named after the table, so consumers can schedule on it.

Parsing this file reads only the registry: no connection, Variable, file or pyspark import.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Asset, Param, task

from spark_jobs.launch.submit import Submission
from spark_jobs.model.jobs import JobSpec
from spark_jobs.registry import JOBS
from streaming.dag_parts import catchup_schedule, input_folder_param, retrying_default_args
from streaming.job_connections import pass_job_connection
from streaming.operators.job_submit import JobSubmitOperator

# A killed run loses nothing (the checkpoint resumes it), so a stuck run is stopped.
DEFAULT_ARGS = retrying_default_args(execution_timeout=timedelta(hours=3))


def table_asset(table: str) -> Asset:
    """The Asset of a lake table, identified by the table's name alone.

    Consumers schedule on ``table_asset("<table>")``. The URI deliberately holds no path: the lake
    root comes from the environment, and an Asset whose identity changed with ``$LAKE_ROOT``
    would leave the previously registered one active and fail the task as "inactive asset".
    """
    return Asset(name=table)


# spark_submit's arguments: those `plan` worked out and checked (an argument list, no shell).
PLANNED_ARGS = "{{ ti.xcom_pull(task_ids='plan')['args'] }}"


def build_catchup_dag(job: JobSpec) -> DAG:
    """The ``<job>_catchup`` DAG of one registry job."""
    with DAG(
        dag_id=f"{job.name}_catchup",
        description=job.description,
        doc_md=f"{__doc__}\n## `{job.name}`\n\n{job.description}\n",
        # Runs of data intervals ([start, end): a backfill run selects its files by it), and for a job that
        # chose it, runs when its input lands (the landing Asset's watcher).
        schedule=catchup_schedule(job),
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=[*job.tags, "catchup"],
        params={
            "input": input_folder_param(job, "to read in this run"),
            "max_files_per_trigger": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Files per micro-batch",
                description="Input files per micro-batch in this run. Empty: the registry's "
                            "maxFilesPerTrigger.",
            ),
            **({"start_at": Param(
                None,
                type=["null", "string"],
                title="Start at (first run only)",
                description="A new checkpoint skips the files delivered before this time: 'now', or an ISO-8601 "
                            "time (UTC). Its history is not listed; load it with the backfill DAG. Ignored once the "
                            "job has a checkpoint.",
            )} if job.discovers_files else {}),
        },
    ) as dag:

        @task.short_circuit(task_id="plan")
        def plan(params=None, dag_run=None, data_interval_start=None, data_interval_end=None,
                 ti=None) -> dict | None:
            """The live job, or (a run of Airflow's backfill) the files of this data interval; nothing to do, or the
            continuous job owns the checkpoint: skip."""
            from airflow.sdk.exceptions import AirflowFailException

            from spark_jobs.control.catchup.backfill import BackfillRefused
            from spark_jobs.control.catchup.plan import plan_run
            from spark_jobs.control.supervision.ownership import continuous_owner
            from spark_jobs.model.lake import Lake
            from streaming.operators.job_submit import record_try

            try:
                planned = plan_run(job.name, params["input"], params["max_files_per_trigger"], dag_run.run_type,
                                   (data_interval_start, data_interval_end), params.get("start_at"))
            except BackfillRefused as exc:
                record_try({"ti": ti, "dag_run": dag_run}, job.name, "catch-up", reason=f"refused: {exc}")
                raise AirflowFailException(f"refused, nothing was run: {exc}") from None
            if planned["kind"] == "live":
                owner = continuous_owner(job.name, str(Lake.at().control_path(job.name)))
                if owner is not None:
                    print(f"{owner}: nothing to do in this run (spark_submit is skipped)")
                    ti.xcom_push(key="owned_by", value=owner)
                    return None
            if planned["kind"] == "backfill":
                print(f"backfill run of {job.name} for [{planned['time_from']}, {planned['time_to']}): "
                      f"{planned['files']} files delivered in the interval ({planned['out_of_range']} outside it, "
                      f"{planned['undated']} without a date) in {planned['source']}; writer {planned['writer']}")
            if planned["args"] is None:
                print("no file was delivered in this interval: nothing to do, spark_submit is skipped")
                return None
            return planned

        submit = JobSubmitOperator(
            task_id="spark_submit",
            job=job.name,
            kind="catch-up",
            plan_task_id="plan",
            # python -m spark_jobs <plan's args> on spark_default, with the pinned jars and the Delta and class
            # archive conf (spark_jobs.launch.submit: paths only, nothing is read while parsing).
            **Submission.of(PLANNED_ARGS, name=job.name).operator_kwargs(),
            # The args template renders to a list; every other field is a plain string.
            render_template_as_native_obj=True,
            outlets=[table_asset(table.name) for table in job.tables],
            # A Kafka job's Airflow connection, looked up when the task runs, into the driver's environment.
            pre_execute=pass_job_connection(job),
            doc_md=f"spark-submit `{job.name}` once with the available-now trigger (or one backfilled interval).",
        )
        plan() >> submit
    return dag


for _job in JOBS.values():
    globals()[f"{_job.name}_catchup"] = build_catchup_dag(_job)
