"""
# Continuous DAGs: one per registry job with a `continuous_trigger`

`<job>_continuous` keeps the job's streaming driver running around the clock (for `cloudtrail_etl`:
`cloudtrail_etl_continuous`). Its one run at a time holds two tasks side by side:

- **`supervise`** spark-submits `run <job> --trigger <continuous_trigger>` and keeps the driver
  alive: a driver that dies, or stalls (its lease's heartbeat stops, or no commit while input
  waits), is killed and restarted from the same checkpoint (at once the first time, then with
  exponential backoff), within the registry's restart budget (`RestartPolicy`). When the job keeps
  a warm standby (its setting: the registry's `RestartPolicy.warm_standby`, on for `cloudtrail_etl`,
  switched for every later run by the on-call action `set_warm_standby`), a second, warmed-up driver
  waits beside it and takes over within seconds whatever of the driver dies; the param
  `warm_standby` overrides the setting for one run. The supervisor's state (consecutive failures, backing off,
  next attempt, restarts in the window, last reason) is in the task's XCom `supervisor`; each
  restart and the give-up reach a person through the notifier (a log line, and a webhook when
  `SUPERVISOR_WEBHOOK_URL` or the connection `supervisor_webhook` is set). It holds one worker
  slot while the driver runs: the driver is its child (see the operator).
- **`checkpoint_health`** watches the checkpoint from the triggerer (no worker slot) and logs each
  change of its health (`healthy`, `lagging`, `stalled`, `dead`, ...) with the problems found, in XCom
  `health`; it ends when `supervise` ends. At each look it also decides the job's health alerts
  (falling behind, stalled, backlog, quarantine rate, restarts over budget: the registry's
  `AlertThresholds`) and sends each once when its incident opens and once when it resolves (a log
  line, and the same webhook). The **Stream health** tab of this DAG shows the job's state and plots.

**To stop the job, pause the DAG**: the driver stops after its micro-batch and `supervise` ends
successfully (the run shows success once the DAG is unpaused again). Marking `supervise` failed or
clearing it stops the driver too. When the supervisor gives up, the run fails and the DAG pauses
itself (`max_consecutive_failed_dag_runs=1`): the job stays stopped until a person has fixed the
cause and unpauses it. On unpause a new run starts at once (`@continuous`).

Parsing this file reads only the registry: no connection, Variable, file or pyspark import.
"""

from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG, Param

from spark_jobs.model.jobs import JobSpec

from spark_jobs.registry import JOBS
from streaming.dag_parts import input_folder_param
from streaming.notifiers import SupervisorEventNotifier
from streaming.operators.supervisor import StreamingSupervisorOperator
from streaming.sensors.checkpoint_health import CheckpointHealthSensor

DEFAULT_ARGS = {
    "owner": "data-platform",
    # Restarts are the supervisor's (backoff, budget); a task retry would restart past the budget.
    "retries": 0,
}


def build_continuous_dag(job: JobSpec) -> DAG:
    """The ``<job>_continuous`` DAG of one registry job with a continuous trigger."""
    with DAG(
        dag_id=f"{job.name}_continuous",
        description=f"{job.description} (continuous, {job.continuous_trigger})",
        doc_md=f"{__doc__}\n## `{job.name}`\n\n{job.description}\n\nTrigger: `{job.continuous_trigger}`; "
               f"restart policy: `{job.restart}`.\n",
        schedule="@continuous",
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        max_consecutive_failed_dag_runs=1,
        default_args=DEFAULT_ARGS,
        tags=[*job.tags, "continuous"],
        params={
            "input": input_folder_param(job, "the driver reads"),
            # None: the job's setting (on-call's set_warm_standby, else the registry's), read while the task runs.
            "warm_standby": Param(None, type=["null", "boolean"], title="Warm standby (this run only)",
                                  description="Keep a second, warmed-up driver waiting on the checkpoint's lease: it "
                                              "takes over within seconds whatever of the driver dies, at the cost of "
                                              "a second driver's memory (docs/continuous-jobs.md). Empty: the job's "
                                              "setting, kept for every run (the on-call action set_warm_standby; "
                                              f"the registry's default: {'on' if job.restart.warm_standby else 'off'})."),
        },
    ) as dag:
        StreamingSupervisorOperator(
            task_id="supervise",
            job=job.name,
            input_path="{{ params.input or '' }}",
            warm_standby="{{ params.warm_standby }}",
            notifier=SupervisorEventNotifier(),
            doc_md=f"spark-submit `{job.name}` with `{job.continuous_trigger}` and keep it running "
                   f"(XCom `supervisor`).",
        )
        CheckpointHealthSensor(
            task_id="checkpoint_health",
            job=job.name,
            input_path="{{ params.input or '' }}",
            doc_md=f"The checkpoint health of `{job.name}` while `supervise` runs (XCom `health`).",
        )
    return dag


for _job in JOBS.values():
    if _job.continuous_trigger:
        globals()[f"{_job.name}_continuous"] = build_continuous_dag(_job)
