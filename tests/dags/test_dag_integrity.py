"""Every DAG file parses cleanly and cheaply, and each registry job's catch-up DAG follows the policies."""

from __future__ import annotations

import copy
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from spark_jobs.cli.main import build_parser
from spark_jobs.launch.jars import DELTA_CONF, jar_paths
from spark_jobs.launch.submit import spark_submit_conf
from spark_jobs.registry import JOBS, table_specs
from tests.helpers.airflow_fixtures import DAGS_FOLDER, run_parse_probe
from tests.helpers.project import PROJECT_ROOT

APPLICATION = str(PROJECT_ROOT / "spark_jobs" / "__main__.py")


@pytest.fixture(params=sorted(JOBS))
def job(request):
    return JOBS[request.param]


@pytest.fixture
def dag(dagbag, job):
    return dagbag.dags[f"{job.name}_catchup"]


def test_every_dag_file_imports_without_errors(dagbag):
    files = sorted(str(p) for p in DAGS_FOLDER.glob("*.py"))
    assert files
    assert dagbag.import_errors == {}
    assert sorted(dagbag.file_last_changed) == files


def test_every_registry_job_has_its_catchup_dag(dagbag):
    assert {f"{name}_catchup" for name in JOBS} <= set(dagbag.dag_ids)


def test_backfill_dags_are_made_for_the_jobs_that_accept_backfills_only(dagbag):
    backfills = {dag_id for dag_id in dagbag.dag_ids if dag_id.endswith("_backfill")}
    assert backfills == {f"{name}_backfill" for name, job in JOBS.items() if job.accepts_backfill}
    assert "cloudtrail_etl_backfill" in backfills
    # the analytics jobs count or rewrite (a second writer would be wrong); Kafka's are not files
    assert not backfills & {f"{name}_backfill" for name in ("cloudtrail_activity", "cloudtrail_alerts", "word_count",
                                                            "cloudtrail_kafka")}


def test_catchup_dag_policies(dag, job):
    from airflow.sdk import AssetOrTimeSchedule, CronDataIntervalTimetable

    # Runs of data intervals (a backfill run selects its files by its interval); a job that chose it also runs
    # when its landing Asset's watcher fires, the same cron staying as the safety net.
    cron = CronDataIntervalTimetable(job.schedule, timezone="UTC")
    if job.catchup.on == "data":
        assert isinstance(dag.schedule, AssetOrTimeSchedule) and dag.schedule.timetable == cron
    else:
        assert dag.schedule == cron
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert set(dag.tags) == {*job.tags, "catchup"}
    assert job.description in dag.doc_md


def test_every_task_retries_with_backoff_and_has_a_timeout(dag):
    for task in dag.tasks:
        assert task.retries >= 1, task.task_id
        assert task.retry_exponential_backoff > 1, task.task_id
        assert task.retry_delay > timedelta(0) and task.max_retry_delay >= task.retry_delay, task.task_id
        assert task.execution_timeout is not None, task.task_id


def test_task_spark_submits_the_job_on_spark_default(dag, job):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    assert sorted(dag.task_ids) == ["plan", "spark_submit"]
    assert dag.get_task("plan").downstream_task_ids == {"spark_submit"}
    task = dag.get_task("spark_submit")
    assert isinstance(task, SparkSubmitOperator)
    assert task.task_id == "spark_submit"
    assert task._conn_id == "spark_default"  # the operator keeps conn_id private
    assert task.application == APPLICATION and Path(APPLICATION).is_file()
    assert task.name == job.name


def test_outlets_are_the_jobs_tables_named_by_table(dag, job):
    from airflow.sdk import Asset

    task = dag.get_task("spark_submit")
    # Name-only: an Asset whose URI held $LAKE_ROOT would change identity with the environment.
    assert task.outlets == [Asset(name=table.name) for table in job.tables]


def validate_param(dag, name: str, value) -> None:
    """Validate ``value`` as a trigger would; raises ParamValidationError. (Param.resolve stores the
    value it resolves, so it runs on a copy and the shared DagBag keeps its defaults.)"""
    copy.deepcopy(dag.params.get_param(name)).resolve(value)


def spark_submit_command(dag, params: dict, monkeypatch) -> list[str]:
    """The exact spark-submit command of a manual run with ``params``: what ``plan`` returns, rendered into
    ``spark_submit``'s arguments and built by the provider's hook."""
    from spark_jobs.control.catchup.plan import plan_run

    task = dag.get_task("spark_submit")
    values = {**dag.params.dump(), **params}
    for name, value in values.items():
        validate_param(dag, name, value)
    planned = plan_run(dag.dag_id.removesuffix("_catchup"), values["input"], values["max_files_per_trigger"],
                       "manual", None)

    class TaskInstance:
        @staticmethod
        def xcom_pull(task_ids):
            return planned if task_ids == "plan" else None

    rendered = task.render_template(task.application_args, {"params": values, "ti": TaskInstance()})
    monkeypatch.setattr(task, "application_args", rendered)
    return task._get_hook()._build_spark_submit_command(task.application)


@pytest.mark.parametrize("params, extra_args", [
    ({}, []),
    ({"input": "{root}/landing with space"}, ["--input", "{root}/landing with space"]),
    ({"max_files_per_trigger": 5}, ["--max-files-per-trigger", "5"]),
    ({"input": "{root}/in", "max_files_per_trigger": 1}, ["--input", "{root}/in", "--max-files-per-trigger", "1"]),
], ids=["defaults", "input", "max-files", "both"])
def test_params_reach_the_command_line_only_when_set(dag, job, params, extra_args, monkeypatch, tmp_path):
    monkeypatch.setenv(f"{job.name.upper()}_INPUT_ROOTS", str(tmp_path))
    monkeypatch.setenv(job.input_env_var, str(tmp_path))  # the default input must exist
    for folder in ("landing with space", "in"):
        (tmp_path / folder).mkdir()
    params = {k: v.format(root=tmp_path) if isinstance(v, str) else v for k, v in params.items()}
    extra_args = [a.format(root=tmp_path) for a in extra_args]
    command = spark_submit_command(dag, params, monkeypatch)

    master = json.loads(os.environ["AIRFLOW_CONN_SPARK_DEFAULT"])["host"]
    conf = [arg for key, value in spark_submit_conf().items() for arg in ("--conf", f"{key}={value}")]
    assert command[:3] == ["spark-submit", "--master", master]
    assert command[3:3 + len(conf)] == conf
    assert command[3 + len(conf):] == ["--jars", ",".join(str(path) for path in jar_paths()), "--name", job.name, APPLICATION,
                           "run", job.name, "--trigger", "available-now", *extra_args]
    parsed = build_parser().parse_args(command[command.index(APPLICATION) + 1:])
    assert (parsed.command, parsed.job, parsed.trigger) == ("run", job.name, "available-now")
    assert parsed.input == params.get("input")
    assert parsed.max_files_per_trigger == (str(params["max_files_per_trigger"]) if "max_files_per_trigger" in params
                                            else None)


@pytest.mark.parametrize("name, value", [
    ("input", "relative/landing"),
    ("input", 7),
    ("max_files_per_trigger", 0),
    ("max_files_per_trigger", 2.5),
    ("max_files_per_trigger", "10"),
])
def test_params_reject_bad_values(dag, name, value):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        validate_param(dag, name, value)


def test_an_empty_input_folder_is_allowed_and_not_marked_required(dagbag):
    # Airflow's form sends an emptied text field as null, and marks a field required (Trigger disabled) unless its
    # type allows null: every DAG's "Input folder" says "Empty: $<JOB>_INPUT", so empty must pass.
    dags = [dag for dag in dagbag.dags.values() if "input" in dag.params]
    assert {d.dag_id for d in dags} >= {"cloudtrail_etl_catchup", "cloudtrail_etl_continuous", "cloudtrail_etl_reconcile"}
    for dag in dags:
        schema = dag.params.get_param("input").schema
        assert "null" in schema["type"], dag.dag_id
        validate_param(dag, "input", None)


def test_parsing_looks_nothing_up_opens_nothing_and_imports_no_pyspark(airflow_env):
    report = run_parse_probe(DAGS_FOLDER)  # with no AIRFLOW_CONN_* in the environment

    assert report["import_errors"] == {}
    assert {f"{name}_catchup" for name in JOBS} <= set(report["dag_ids"])
    assert report["lookups"] == []
    assert report["opened"] == []
    assert report["pyspark"] == []
    # Only the declarations (the registry and spark_jobs.model) and launch (spark-submit's --jars and --conf).
    allowed = ("spark_jobs", "spark_jobs.registry", "spark_jobs.model", "spark_jobs.launch")
    assert [m for m in report["spark_jobs"] if m not in allowed and not m.startswith(("spark_jobs.model.",
                                                                                        "spark_jobs.launch."))] == []
    assert {f"{name}_continuous" for name, job in JOBS.items() if job.continuous_trigger} <= set(report["dag_ids"])
    assert "streaming_oncall" in report["dag_ids"]


# -- the continuous DAGs (dags/continuous.py) ----------------------------------------------------

CONTINUOUS_JOBS = sorted(name for name, job in JOBS.items() if job.continuous_trigger)


@pytest.fixture(params=CONTINUOUS_JOBS)
def continuous(request, dagbag):
    job = JOBS[request.param]
    return job, dagbag.dags[f"{job.name}_continuous"]


def test_every_continuous_job_has_its_continuous_dag(dagbag):
    assert CONTINUOUS_JOBS  # cloudtrail_etl is continuous
    assert {f"{name}_continuous" for name in CONTINUOUS_JOBS} <= set(dagbag.dag_ids)
    assert not {f"{name}_continuous" for name in set(JOBS) - set(CONTINUOUS_JOBS)} & set(dagbag.dag_ids)


def test_continuous_dag_policies(continuous):
    from airflow.sdk.definitions.timetables.simple import ContinuousTimetable

    job, dag = continuous
    assert isinstance(dag.timetable, ContinuousTimetable)
    assert dag.catchup is False
    assert dag.max_active_runs == 1  # one driver per checkpoint
    assert dag.max_consecutive_failed_dag_runs == 1  # a give-up pauses the DAG until a person unpauses it
    assert set(dag.tags) == {*job.tags, "continuous"}
    assert job.description in dag.doc_md and job.continuous_trigger in dag.doc_md


def test_continuous_dag_supervises_and_watches_side_by_side(continuous):
    from streaming.operators.supervisor import StreamingSupervisorOperator
    from streaming.sensors.checkpoint_health import CheckpointHealthSensor

    job, dag = continuous
    supervise, health = dag.get_task("supervise"), dag.get_task("checkpoint_health")
    assert sorted(dag.task_ids) == ["checkpoint_health", "supervise"]
    assert isinstance(supervise, StreamingSupervisorOperator) and isinstance(health, CheckpointHealthSensor)
    assert supervise.job == health.job == job.name
    assert supervise.conn_id == "spark_default"
    assert health.watch_task_id == "supervise"
    # Restarts belong to the supervisor's budget: a task retry would restart past it.
    assert supervise.retries == 0 and health.retries == 0
    assert not supervise.downstream_task_ids and not health.downstream_task_ids
    assert supervise.input_path == health.input_path == "{{ params.input or '' }}"  # an empty field is null
    # The param overrides the job's standby setting for one run only.
    assert supervise.warm_standby == "{{ params.warm_standby }}"
    # Empty: the job's setting (on-call's, else the registry's), which the form's help names.
    assert dag.params["warm_standby"] is None
    said = dag.params.get_param("warm_standby").description
    assert said.endswith(f"the registry's default: {'on' if job.restart.warm_standby else 'off'}).")


BAD_DAG = '''
from pathlib import Path

import pyspark.sql
from airflow.sdk import DAG, BaseHook, Variable

try:
    BaseHook.get_connection("spark_default")
except Exception:
    pass
try:
    Variable.get("lake_root")
except Exception:
    pass
SETTINGS = Path(__file__).with_name("settings.txt").read_text()

with DAG("parses_badly", schedule=None):
    pass
'''


def test_parse_probe_reports_a_dag_that_does_io_at_parse_time(airflow_env, tmp_path):
    (tmp_path / "bad_dag.py").write_text(BAD_DAG)
    (tmp_path / "settings.txt").write_text("x")

    report = run_parse_probe(tmp_path)

    assert report["import_errors"] == {}
    assert report["dag_ids"] == ["parses_badly"]
    assert sorted(set(report["lookups"])) == ["Connection.get('spark_default',)", "Variable.get('lake_root',)"]
    assert report["opened"] == [str(tmp_path / "settings.txt")]
    assert "pyspark.sql" in report["pyspark"]


# --- lake_maintenance (dags/lake_maintenance.py): optimize, then vacuum, every registry table ---

TABLES = [table.name for table in table_specs()]


def test_lake_maintenance_runs_daily_one_at_a_time_optimize_before_vacuum(dagbag):
    dag = dagbag.dags["lake_maintenance"]
    assert (dag.schedule, dag.catchup, dag.max_active_runs) == ("@daily", False, 1)
    assert set(dag.tags) == {"maintenance", "delta"}
    assert sorted(dag.task_ids) == sorted(f"{step}_{table}" for table in TABLES for step in ("optimize", "vacuum"))
    for table in TABLES:
        assert dag.get_task(f"optimize_{table}").downstream_task_ids == {f"vacuum_{table}"}
    for task in dag.tasks:
        assert task.retries >= 1 and task.retry_exponential_backoff > 1, task.task_id
        assert task.execution_timeout is not None, task.task_id


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("step", ["optimize", "vacuum"])
def test_lake_maintenance_spark_submits_the_lake_command_with_the_delta_jars(dagbag, step, table):
    task = dagbag.dags["lake_maintenance"].get_task(f"{step}_{table}")
    command = task._get_hook()._build_spark_submit_command(task.application)

    master = json.loads(os.environ["AIRFLOW_CONN_SPARK_DEFAULT"])["host"]
    assert command[:3] == ["spark-submit", "--master", master]
    confs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    assert set(confs) == {f"{k}={v}" for k, v in spark_submit_conf().items()}
    assert command[command.index("--jars") + 1] == ",".join(str(p) for p in jar_paths())
    changed_only = ["--changed-only"] if step == "optimize" else []  # a Z-order rewrites only the days written to
    assert command[command.index(APPLICATION) + 1:] == ["lake", step, "--table", table, *changed_only]
    parsed = build_parser().parse_args(command[command.index(APPLICATION) + 1:])
    assert (parsed.command, parsed.lake_command, parsed.table) == ("lake", step, table)


# --- streaming_oncall (dags/streaming_oncall.py): one checked, audited on-call action per run ---------------

def test_oncall_dag_runs_one_action_at_a_time_without_retries(dagbag):
    from streaming.operators.oncall import OncallActionOperator

    dag = dagbag.dags["streaming_oncall"]
    assert (dag.schedule, dag.catchup, dag.max_active_runs) == (None, False, 1)
    assert set(dag.tags) == {"oncall", "operations"}
    [task] = dag.tasks
    assert isinstance(task, OncallActionOperator) and task.retries == 0
    assert (task.conn_id, task.api_conn_id) == ("spark_default", "airflow_api")


def test_oncall_form_offers_the_registrys_jobs_actions_and_tables(dagbag):
    from spark_jobs.registry import ONCALL_ACTIONS

    dag = dagbag.dags["streaming_oncall"]
    schema = {name: param.schema for name, param in dag.params.items()}
    assert schema["job"]["enum"] == [None, *sorted(JOBS)]
    assert schema["action"]["enum"] == [None, *ONCALL_ACTIONS]
    assert schema["table"]["enum"] == [None, *sorted(TABLES)]
    assert schema["reason"]["minLength"] == 1
    # No default job or action: the person chooses; an empty choice reads as such, never as "null".
    defaults = {name: param.value for name, param in dag.params.items()}
    assert defaults == {"job": None, "action": None, "from_time": None, "table": None, "table_version": None,
                        "warm_standby": None, "version": None, "reason": None, "dry_run": False}
    assert schema["warm_standby"]["enum"] == [None, "on", "off", "default"]
    assert {name: schema[name]["values_display"]["null"] for name in ("job", "action", "table", "warm_standby")} == {
        "job": "(choose)", "action": "(choose)", "table": "(none: rollback_table only)",
        "warm_standby": "(none: set_warm_standby only)"}
    assert dag.is_paused_upon_creation is False  # no "Unpause streaming_oncall on trigger" box to miss


@pytest.mark.parametrize("name, value", [
    ("job", "no_such_job"), ("action", "reboot"), ("reason", ""),
    ("table", "../cloudtrail_events"), ("table_version", -1), ("table_version", "3"), ("dry_run", "yes"),
    ("version", "../v2"), ("version", "v 2"),
])
def test_oncall_form_refuses_bad_values_before_a_run(dagbag, name, value):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        validate_param(dagbag.dags["streaming_oncall"], name, value)
