"""StreamingSupervisorOperator: the driver command from spark_default, the policy's test overrides."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from spark_jobs.cli.main import build_parser
from spark_jobs.launch.class_archive import DEFAULT_JAVA_OPTIONS_CONF
from spark_jobs.launch.jars import jar_paths
from spark_jobs.launch.jit import SHORT_LIVED_OPTIONS
from spark_jobs.launch.submit import driver_java_options
from spark_jobs.model.lake import PROJECT_ROOT
from spark_jobs.registry import get_job
from streaming.operators.supervisor import POLICY_ENV, StreamingSupervisorOperator, as_flag, restart_policy

APPLICATION = str(PROJECT_ROOT / "spark_jobs" / "__main__.py")


def test_driver_command_is_spark_submit_on_spark_default_with_the_jobs_continuous_trigger():
    operator = StreamingSupervisorOperator(task_id="supervise", job="cloudtrail_etl")

    command = operator.driver_command("processing-time:10s", "/data/in")

    master = json.loads(os.environ["AIRFLOW_CONN_SPARK_DEFAULT"])["host"]
    assert command[:3] == ["spark-submit", "--master", master]
    assert not any(arg.startswith("spark.executorEnv.PYTHONPATH=") for arg in command)  # the code zip instead
    # Spark's streaming gauges for Prometheus on the driver's UI (spark_jobs.control.monitoring.prometheus)
    assert "spark.sql.streaming.metricsEnabled=true" in command
    assert "spark.metrics.conf.*.sink.prometheusServlet.class=org.apache.spark.metrics.sink.PrometheusServlet" in command
    assert command[command.index("--jars") + 1] == ",".join(str(p) for p in jar_paths())
    # A driver that lives for days keeps the JVM's default JIT (C1 only is for short-lived drivers: launch/jit.py)
    assert f"{DEFAULT_JAVA_OPTIONS_CONF}={driver_java_options(long_running=True)}" in command
    assert not any(SHORT_LIVED_OPTIONS in arg for arg in command)
    assert command[command.index(APPLICATION) - 2:command.index(APPLICATION)] == ["--name", "cloudtrail_etl"]
    args = command[command.index(APPLICATION) + 1:]
    assert args == ["run", "cloudtrail_etl", "--trigger", "processing-time:10s", "--input", "/data/in"]
    parsed = build_parser().parse_args(args)
    assert (parsed.command, parsed.job, parsed.trigger, parsed.input) == ("run", "cloudtrail_etl",
                                                                         "processing-time:10s", "/data/in")


def test_without_override_the_registrys_policy_applies(monkeypatch):
    monkeypatch.delenv(POLICY_ENV, raising=False)
    job = get_job("cloudtrail_etl")
    assert restart_policy(job) == job.restart


def test_policy_override_replaces_only_the_fields_it_names(monkeypatch):
    monkeypatch.setenv(POLICY_ENV, '{"max_restarts": 2, "initial_backoff_seconds": 1}')
    job = get_job("cloudtrail_etl")

    assert restart_policy(job) == dataclasses.replace(job.restart, max_restarts=2, initial_backoff_seconds=1)


@pytest.mark.parametrize("raw", ['{"max_restart": 2}', "[1, 2]", "max_restarts=2"])
def test_a_bad_policy_override_names_the_value_and_the_fields(monkeypatch, raw):
    monkeypatch.setenv(POLICY_ENV, raw)

    with pytest.raises(ValueError) as error:
        restart_policy(get_job("cloudtrail_etl"))

    assert f"${POLICY_ENV}={raw!r} is not a JSON object of RestartPolicy fields" in str(error.value)
    assert "max_restarts" in str(error.value) and "initial_backoff_seconds" in str(error.value)


@pytest.mark.parametrize("rendered, flag", [(True, True), ("True", True), ("false", False), ("None", None), ("", None),
                                            (None, None)])
def test_the_rendered_warm_standby_param_is_a_flag(rendered, flag):
    assert as_flag(rendered, "warm_standby") is flag


def test_a_warm_standby_that_is_no_flag_names_the_value():
    with pytest.raises(ValueError) as error:
        as_flag("sometimes", "warm_standby")
    assert str(error.value) == "warm_standby='sometimes' is not a boolean; give true or false"
