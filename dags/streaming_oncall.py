"""
# streaming_oncall: on-call actions on a streaming job, from a form, checked and audited

Trigger it with its form: choose the **Job** and the **Action** (neither has a default), fill in the fields the
action needs and a **Reason** (required), **Dry run** (say exactly what would happen, do nothing). The form or its
JSON (Advanced options) may leave a field empty: the task checks every field and refuses naming the one that is
missing or wrong. The DAG is unpaused when it is created (it runs only when triggered).

| action | what it does |
|---|---|
| `restart` | clears `supervise` of the running `<job>_continuous` run: the driver stops after its micro-batch, a new one starts from the same checkpoint |
| `stop` | pauses `<job>_continuous`: the driver stops after its micro-batch; waits until its lease is released |
| `pause_supervision` | the supervisor keeps the driver running but stops restarting it or killing it when it stalls |
| `resume_supervision` | lifts that hold, and unpauses `<job>_continuous` if it is paused (the job starts again) |
| `set_warm_standby` | keeps the job's warm standby on or off (or the registry's default) for every later run; the running supervisor follows within seconds |
| `rollout` | moves the running job to a new version (*Version*, a release): the supervisor checks it in pre-flight while the old driver runs, hands over, watches it on probation and rolls it back by itself (docs/deploying.md) |
| `rollout_destructive` | deploys a version that pre-flight refused (*Version*; a changed stateful operator or column type): the supervisor stops the driver after its micro-batch, moves its checkpoint and tables to a backup, starts the version on a new checkpoint, which rebuilds every table from the input (empty tables filling up meanwhile; docs/deploying.md) |
| `reprocess_from` | replays the input delivered from **From time** on; each table's affected partitions rebuilt in one Delta commit (no duplicates, no holes; readers see old or new rows, never a mix) |
| `reset_checkpoint` | (job stopped) moves the checkpoint to a backup; the next run starts fresh, the tables stay exact |
| `rollback_table` | restores **Table** to **Table version** (`lake restore`: a new version, itself undoable) |

**Four eyes**: `reprocess_from`, `reset_checkpoint`, `rollback_table` and `rollout_destructive` (not their dry runs)
wait for a second user's approval: the task shows the dry run's plan as a required action (**Browse > Required Actions**, or the REST
API `PATCH /api/v2/dags/streaming_oncall/dagRuns/<run>/taskInstances/act/-1/hitlDetails` with
`{"chosen_options": ["Approve"]}`), and runs only after another user than the requester chose **Approve**. With the
simple auth manager the request is assigned to every other user allowed to answer ("May approve" in it): Airflow
refuses the requester's own answer ("... is not a respondent for the task") and the request stays open; with no such
user it is refused at once. Where Airflow cannot list the users, the requester's own approval is refused when the
task resumes (nothing runs; the task fails with "refused: the requester cannot approve their own request").
**Reject** runs nothing (the task is skipped); a request nobody answers expires after the registry's time
(`ONCALL_ACTION_SPECS[...].approval_expires_after_seconds`, 4 h) and runs nothing (the task fails). An approved
request is checked again against the job's state of that moment before it runs. `restart`, `stop`,
`pause_supervision`, `resume_supervision`, `set_warm_standby` and `rollout` run at once.

Every field is checked before anything runs (`spark_jobs.control.oncall.requests.check_request`); a refusal ends the
run as refused, not failed: the task is skipped with one log line naming the field, and the audit row says
`refused`. Only checked values reach spark-submit (an argument list, no
shell); the reason goes only to the audit. Every run, refused, rejected, expired and dry runs included, is one row of
the Delta table `ops_audit` (requester, approver, decision and their times too) (`python -m spark_jobs sql "SELECT * FROM ops_audit"`), and the task's
XCom holds the plan and the audit row.

**Who may request**: whoever may trigger this DAG (with the FAB auth manager, `make airflow`'s: the role
`streaming_operator`; with the simple auth manager the `USER` role and above). **Who may approve**: with FAB the role
`streaming_approver`, on **Browse > On-call approvals** (each refusal there, of the requester, the service identity,
someone without that role or a late answer, is a 403 and an `ops_audit` row; docs/identity.md); with the simple auth
manager the `USER` role and above; never the requester. The actions on `<job>_continuous` are made through Airflow's REST API
with the connection `airflow_api` (a service user allowed to edit those DAGs). One action at a time
(`max_active_runs=1`); no retries (a person decides what to do after a failure).

Parsing this file reads only the registry: no connection, Variable, file or pyspark import.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param

from spark_jobs.registry import JOBS, ONCALL_ACTIONS
from streaming.operators.oncall import OncallActionOperator

TABLES = sorted({table.name for job in JOBS.values() for table in job.tables})


def oncall_params() -> dict[str, Param]:
    """The trigger form: typed fields, titles, descriptions; no default job or action (the person chooses), and an
    empty field shows as such, never as ``null``. A field may be left empty in the form and in its JSON alike (the UI
    marks no field required: Airflow 3.3's form keeps "This field is required" under a field filled through the JSON
    editor); the task refuses a missing or wrong one naming it (``check_request``)."""
    return {
        "job": Param(None, type=["null", "string"], enum=[None, *sorted(JOBS)], values_display={"null": "(choose)"},
                     title="Job", description="Required: the registry job to act on."),
        "action": Param(None, type=["null", "string"], enum=[None, *ONCALL_ACTIONS],
                        values_display={"null": "(choose)", **ONCALL_ACTIONS}, title="Action",
                        description="Required: what to do (see the DAG's documentation)."),
        "from_time": Param(None, type=["null", "string"], format="date-time", title="From time (UTC)",
                           description="reprocess_from only: replay the input files delivered at or after this "
                                       "time (the time in the CloudTrail object name)."),
        "table": Param(None, type=["null", "string"], enum=[None, *TABLES],
                       values_display={"null": "(none: rollback_table only)"}, title="Table",
                       description="rollback_table only: the table to roll back."),
        "table_version": Param(None, type=["null", "integer"], minimum=0, title="Table version",
                               description="rollback_table only: the Delta version to bring back "
                                           "(python -m spark_jobs lake history --table T)."),
        "warm_standby": Param(None, type=["null", "string"], enum=[None, "on", "off", "default"],
                              values_display={"null": "(none: set_warm_standby only)"}, title="Warm standby",
                              description="set_warm_standby only: on, off, or default (the registry's); kept for "
                                          "every later run of the continuous DAG."),
        "version": Param(None, type=["null", "string"], pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", title="Version",
                         description="rollout and rollout_destructive only: the release to roll out (python -m spark_jobs "
                                     "release list); rollout checks it in pre-flight, watches it on probation and "
                                     "rolls it back by itself; rollout_destructive takes a version pre-flight refused."),
        "reason": Param(None, type=["null", "string"], minLength=1, maxLength=2000, title="Reason",
                        description="Required: why (kept in the audit table ops_audit)."),
        "dry_run": Param(False, type="boolean", title="Dry run",
                         description="Say exactly what would happen; do nothing."),
    }


with DAG(
    dag_id="streaming_oncall",
    description="on-call actions on a streaming job: restart, stop, supervision, reprocess, reset, rollback",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    # Ready when the night comes: it runs only when triggered, and the trigger form offers no "unpause" box to miss.
    is_paused_upon_creation=False,
    max_active_runs=1,
    default_args={"owner": "data-platform", "retries": 0, "execution_timeout": timedelta(hours=6)},
    tags=["oncall", "operations"],
    params=oncall_params(),
) as streaming_oncall:
    OncallActionOperator(
        task_id="act",
        doc_md="Check the form, do the action (or say what it would do), write the ops_audit row "
               "(XCom `plan`, `audit`).",
    )
