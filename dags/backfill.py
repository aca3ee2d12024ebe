"""
# Backfill DAGs: load historical logs into the live tables, from a form

Each job in `spark_jobs.registry.JOBS` that reads files into insert-only tables (`accepts_backfill`)
gets a DAG `<job>_backfill`, triggered by hand ("Trigger" with
its form). A run loads the files of a `source` folder, optionally only those delivered between
`date_from` and `date_to` (the timestamp in a CloudTrail object name, else its `YYYY/MM/DD`
folders), into the same tables the live stream feeds:

0. The form refuses what its schema can see, before a run exists: a source that is not a folder under the job's
   input roots (`$<JOB>_INPUT_ROOTS`, else the registry's `input_roots`: the `pattern` is built from them when
   this file is parsed), with `..` or shell metacharacters; a date that is not `YYYY-MM-DD`; a bad number.
1. `check_request` checks every field again (`python -m spark_jobs backfill` checks them too), and what a schema
   cannot: the folder exists, no symlink out of a root, the range does not run backwards or into the future. A
   refused request ends the run as **refused**: the task is skipped with one line `backfill refused, nothing was
   run: <field>: <why>`, nothing else runs (the run itself succeeds: no failed run), and the job's timeline says
   `backfill refused: <field>: <why>`. It lists the files (count, out of range, undated) into its log and XCom.
2. `dry_run` set (the form's default: the plan, or the refusal, shows first): the run ends there (the listing is
   the answer); trigger again with it off to load. Otherwise `spark_submit` runs

       spark-submit ... spark_jobs/__main__.py backfill <job> --source <checked folder> \\
           [--date-from D --date-to D] [--max-files-per-trigger N]

   with the checked values only (from `check_request`'s XCom, never from the raw form). The job
   runs available-now with a checkpoint of its own, one per source and range
   (`<lake>/checkpoints/<job>@backfill-...`): rerunning the same backfill resumes it and adds
   nothing; overlapping the live job or another backfill adds nothing (one row per eventID, Delta's
   idempotent writes). Its log shows `progress: N of M files (P%), rows ..., ETA ...` per batch.

Every try of `spark_submit` that ends, and a refused request (outcome `refused`), is a line of the job's run record
(`<lake>/control/<job>/runs.jsonl`: the rows and files loaded, or the reason it failed), on the job's timeline.

Several backfills may run at once (each its own checkpoint); the same request twice at once is
refused by the checkpoint's lease (exit 3). Who may run it: whoever may trigger this DAG (Airflow's
own permissions: DAG Runs "create" on this DAG, the `User` role and above in the FAB auth manager).
Parsing this file reads only the registry and the input roots' setting: no connection, Variable, file or pyspark
import.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param, task

from spark_jobs.launch.submit import Submission
from spark_jobs.model.input_roots import MAX_FILES_PER_TRIGGER, ROOTS_ENV_SUFFIX, configured_roots, source_pattern
from spark_jobs.model.jobs import JobSpec
from spark_jobs.registry import JOBS
from streaming.dag_parts import retrying_default_args
from streaming.operators.job_submit import JobSubmitOperator

# A killed backfill loses nothing (its checkpoint resumes it); months of logs may take hours.
DEFAULT_ARGS = retrying_default_args(execution_timeout=timedelta(hours=12))


def backfill_params(job: JobSpec) -> dict[str, Param]:
    """The trigger form: typed fields with titles, descriptions and the checks a form can make, so that Airflow
    refuses the request before a run exists: the source's ``pattern`` is built now from the job's input roots
    (:func:`~spark_jobs.model.input_roots.source_pattern`), the dates are ``format: date``.

    What the schema cannot say (the folder exists, no symlink out of a root, the dates' order, not in the future) is
    checked by ``check_request``; a dry run, the default, shows its plan or its refusal before anything is loaded.
    """
    roots = ", ".join(configured_roots(job)) or "(none)"
    return {
        "source": Param("", type="string", minLength=1, pattern=source_pattern(job),
                        title="Source folder",
                        description=f"Absolute folder (or file:// URL) of the historical logs, under one of the "
                                    f"job's input roots: {roots} (${job.name.upper()}{ROOTS_ENV_SUFFIX}, else the "
                                    f"registry's input_roots). A path outside them is refused here."),
        "date_from": Param(None, type=["null", "string"], format="date", title="From (delivery date, UTC)",
                           description="First delivery date to load, YYYY-MM-DD. Leave both dates empty to load "
                                       "every file of the source, dated or not."),
        "date_to": Param(None, type=["null", "string"], format="date", title="To (delivery date, UTC)",
                         description="Last delivery date to load, inclusive, YYYY-MM-DD: not before From, not in "
                                     "the future. Empty: today."),
        "max_files_per_trigger": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_FILES_PER_TRIGGER,
                                       title="Files per micro-batch",
                                       description="Smaller batches leave the live job more of the cluster. "
                                                   "Empty: the registry's maxFilesPerTrigger."),
        "dry_run": Param(True, type="boolean", title="Dry run",
                         description="On: list the files and their count, or say why the request is refused; "
                                     "write nothing. Turn it off to load them."),
    }


def build_backfill_dag(job: JobSpec) -> DAG:
    """The ``<job>_backfill`` DAG of one registry job."""
    with DAG(
        dag_id=f"{job.name}_backfill",
        description=f"backfill historical files into the tables of {job.name}",
        doc_md=f"{__doc__}\n## `{job.name}`\n\n{job.description}\n",
        schedule=None,
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=4,
        default_args=DEFAULT_ARGS,
        tags=[*job.tags, "backfill"],
        params=backfill_params(job),
    ) as dag:

        @task(task_id="check_request", retries=0)
        def check_request(params=None, ti=None, dag_run=None) -> dict:
            """Check the form (refused: the run ends refused, naming the field; nothing else runs) and list the
            files."""
            from airflow.sdk.exceptions import AirflowSkipException

            from spark_jobs.control.catchup.backfill import BackfillRefused, check_request as check, list_files
            from streaming.operators.job_submit import record_try

            try:
                request = check(job.name, params["source"], params["date_from"], params["date_to"],
                                params["max_files_per_trigger"], params["dry_run"])
            except BackfillRefused as exc:
                record_try({"ti": ti, "dag_run": dag_run}, job.name, "backfill", reason=str(exc), outcome="refused")
                # A logger line, not print: stdout is flushed after the skip, inside the log's folded "Post Execute".
                logging.getLogger(__name__).info("backfill refused, nothing was run: %s", exc)
                raise AirflowSkipException(f"backfill refused: {exc}") from None
            listing = list_files(request)
            summary = {"writer": request.writer, "source": str(request.source), "dry_run": request.dry_run,
                       **listing.summary()}
            print(f"backfill of {job.name}: {summary['files']} files to load from {request.source} "
                  f"({listing.out_of_range} out of the range, {listing.undated} without a date); writer "
                  f"{request.writer}")
            for path in listing.files[:200]:
                print(f"  {path}")
            return {**summary, "args": request.cli_args()}

        @task.short_circuit(task_id="unless_dry_run")
        def unless_dry_run(checked: dict) -> bool:
            """A dry run ends after the listing."""
            return not checked["dry_run"]

        checked = check_request()
        submit = JobSubmitOperator(
            task_id="spark_submit",
            job=job.name,
            kind="backfill",
            plan_task_id="check_request",
            # The checked request's arguments, as a list: nothing from the raw form.
            **Submission.of("{{ ti.xcom_pull(task_ids='check_request')['args'] }}",
                            name=f"{job.name}_backfill").operator_kwargs(),
            render_template_as_native_obj=True,
            doc_md=f"`python -m spark_jobs backfill {job.name} ...` under spark-submit, with the checked values.",
        )
        unless_dry_run(checked) >> submit
    return dag


for _job in JOBS.values():
    if _job.accepts_backfill:  # jobs that read files into insert-only tables (not counts or rewritten tables)
        globals()[f"{_job.name}_backfill"] = build_backfill_dag(_job)
