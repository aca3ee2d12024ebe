"""
# Reconcile DAGs: what a job's discovery window missed, ingested exactly once

Each job in `spark_jobs.registry.JOBS` whose file source declares a key layout (it discovers its files by
listing only each folder's window: `spark_jobs.control.discovery`) gets a DAG `<job>_reconcile`, run on the
source's `reconcile_schedule` (daily by default). It spark-submits

    python -m spark_jobs reconcile <job> [--input DIR] [--since TIME] [--dry-run]

which lists the landing's whole history once, leaves what the live stream still looks for, compares the rest
with the files the job's tables hold rows of, and ingests the files neither has (a delivery that arrived after
its folder's window had closed) as a writer of its own (`<job>@reconcile`): exactly once beside the live job
and the backfills. Its report (listed, the live window's, already ingested, missed) is in the task log, in
`<lake>/control/<job>/reconcile.json`, in `checkpoint inspect` and on the health page.

Parsing this file reads only the registry: no connection, Variable, file or pyspark import.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param

from spark_jobs.launch.submit import Submission
from spark_jobs.model.jobs import JobSpec
from spark_jobs.registry import JOBS
from streaming.dag_parts import input_folder_param, retrying_default_args

# A killed run loses nothing: the next one lists again and the reconcile writer's checkpoint resumes.
DEFAULT_ARGS = retrying_default_args(execution_timeout=timedelta(hours=6))


def reconcile_args(job: JobSpec) -> str:
    """The spark-submitted command's arguments, as a template of the run's form (a list, no shell)."""
    return (f"{{{{ ['reconcile', '{job.name}'] + (['--input', params.input] if params.input else []) + "
            "(['--since', params.since] if params.since else []) + (['--dry-run'] if params.dry_run else []) }}")


def build_reconcile_dag(job: JobSpec) -> DAG:
    """The ``<job>_reconcile`` DAG of one registry job that discovers its files."""
    with DAG(
        dag_id=f"{job.name}_reconcile",
        description=f"{job.name}: list the whole landing, ingest what the discovery window missed",
        doc_md=f"{__doc__}\n## `{job.name}`\n\n{job.description}\n",
        schedule=job.source.reconcile_schedule,
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=[*job.tags, "reconcile"],
        params={
            "input": input_folder_param(job, "to list"),
            "since": Param(None, type=["null", "string"], format="date-time", title="Delivered since",
                           description="Only files delivered at or after this time (UTC). Empty: the whole history."),
            "dry_run": Param(False, type="boolean", title="Dry run",
                             description="List and compare, ingest nothing (the report says what would be)."),
        },
    ) as dag:
        SparkSubmitOperator(
            task_id="reconcile",
            **Submission.of(reconcile_args(job), name=f"{job.name}_reconcile").operator_kwargs(),
            render_template_as_native_obj=True,
            doc_md=f"`python -m spark_jobs reconcile {job.name}` under spark-submit.",
        )
    return dag


for _job in JOBS.values():
    if _job.discovers_files:
        globals()[f"{_job.name}_reconcile"] = build_reconcile_dag(_job)
