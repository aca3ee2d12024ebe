"""The one spark-submit builder: the provider's public API and the plain command run the same spark-submit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.launch.jars import spark_submit_jars
from spark_jobs.launch.submit import (APPLICATION, SPARK_CONN_ID, SparkConnection, Submission, spark_submit_conf)
from spark_jobs.model.errors import UsageError
from tests.helpers.project import PROJECT_ROOT
from tools.standalone import connection_json

CONNECTIONS = {
    "local": '{"conn_type": "spark", "host": "local[2]"}',
    "standalone": connection_json("127.0.0.1", 17077),
}
# A spark-submit that records how it was started (its arguments and one variable of its environment).
RECORDER = """#!{python}
import json, os, sys
with open({out!r}, "a") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "env": os.environ.get("SUBMIT_TEST_VAR")}}) + "\\n")
"""


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """Put a recording ``spark-submit`` first on ``PATH``; returns a function that reads what it recorded."""
    out = tmp_path / "calls.jsonl"
    binary = tmp_path / "bin" / "spark-submit"
    binary.parent.mkdir()
    binary.write_text(RECORDER.format(python=sys.executable, out=str(out)))
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    return lambda: [json.loads(line) for line in out.read_text().splitlines()]


def submission() -> Submission:
    return Submission.of(["run", "cloudtrail_etl", "--trigger", "available-now", "--input", "/data/in"],
                         name="cloudtrail_etl", extra_conf={"spark.ui.prometheus.enabled": "true"},
                         driver_memory="768m", env_vars={"SUBMIT_TEST_VAR": "handed over"})


@pytest.mark.parametrize("master", sorted(CONNECTIONS))
def test_the_provider_and_the_plain_command_run_the_same_spark_submit(master, recorded, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", CONNECTIONS[master])
    planned = submission()

    SparkSubmitHook(**planned.hook_kwargs()).submit(planned.application)
    SparkSubmitOperator(task_id="spark_submit", **planned.operator_kwargs()).execute(context={})
    command = planned.argv(SparkConnection.from_airflow_env())
    subprocess.run(command, env=planned.environment(), check=True)

    by_hook, by_operator, by_command = recorded()
    assert by_hook == by_operator == by_command == {"argv": command[1:], "env": "handed over"}
    assert command[0] == "spark-submit"


def test_the_plain_command_of_each_master(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", CONNECTIONS["standalone"])
    conf = [arg for key, value in {**spark_submit_conf(), "spark.ui.prometheus.enabled": "true"}.items()
            for arg in ("--conf", f"{key}={value}")]
    tail = ["--jars", spark_submit_jars(), "--driver-memory", "768m", "--name", "cloudtrail_etl"]
    args = [APPLICATION, "run", "cloudtrail_etl", "--trigger", "available-now", "--input", "/data/in"]

    assert submission().argv(SparkConnection.from_airflow_env()) == [
        "spark-submit", "--master", "spark://127.0.0.1:17077", *conf, *tail, "--deploy-mode", "client", *args]
    assert submission().argv(SparkConnection.from_spark_master({"SPARK_MASTER": "local[3]"})) == [
        "spark-submit", "--master", "local[3]", *conf, *tail, "--deploy-mode", "client", *args]
    assert SparkConnection.from_spark_master({}) == SparkConnection("local[2]", "client")


@pytest.mark.parametrize("value, expected", [
    ('{"conn_type": "spark", "host": "local[*]"}', SparkConnection("local[*]")),
    ('{"conn_type": "spark", "host": "spark://m", "port": 7077, "extra": "{\\"deploy-mode\\": \\"client\\"}"}',
     SparkConnection("spark://m:7077", "client")),
    ("spark://m:7077?deploy-mode=cluster", SparkConnection("spark://m:7077", "cluster")),
])
def test_the_connection_is_read_from_the_environment_as_airflow_writes_it(value, expected):
    assert SparkConnection.from_airflow_env(environ={"AIRFLOW_CONN_SPARK_DEFAULT": value}) == expected


def test_what_the_plain_command_cannot_own_is_refused_naming_it():
    with pytest.raises(UsageError, match=r"no Spark connection 'spark_default': set \$AIRFLOW_CONN_SPARK_DEFAULT"):
        SparkConnection.from_airflow_env(environ={})
    assert SparkConnection.from_airflow_env(environ={}, default=SparkConnection("local[1]")).master == "local[1]"
    with pytest.raises(UsageError, match="extra keytab, queue is only understood by Airflow's Spark provider"):
        SparkConnection.from_fields("spark", "yarn", None, {"queue": "etl", "keytab": "x"})
    with pytest.raises(UsageError, match="a yarn master is submitted through Airflow's Spark provider"):
        submission().argv(SparkConnection("yarn"))
    with pytest.raises(UsageError, match="are a template"):
        Submission.of("{{ ti.xcom_pull(task_ids='plan')['args'] }}", name="x").argv(SparkConnection("local[2]"))


def test_an_operators_arguments_may_be_a_template_and_nothing_optional_is_passed_unset():
    kwargs = Submission.of("{{ params.args }}", name="job").operator_kwargs()
    assert kwargs == {"conn_id": SPARK_CONN_ID, "conf": spark_submit_conf(), "jars": spark_submit_jars(),
                      "name": "job", "application_args": "{{ params.args }}", "application": APPLICATION}


def test_the_spark_connection_id_is_written_once():
    quoted = re.compile(r"""["']spark_default["']""")
    found = [str(path.relative_to(PROJECT_ROOT)) for folder in ("spark_jobs", "dags", "plugins", "tools")
             for path in sorted((PROJECT_ROOT / folder).rglob("*.py")) if quoted.search(path.read_text())]
    assert found == ["spark_jobs/launch/submit.py"]
