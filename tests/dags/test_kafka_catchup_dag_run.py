"""cloudtrail_kafka_catchup run for real by ``airflow dags test``, with its Kafka connection kept only in
Airflow's metadata DB (``airflow connections add``, as Admin > Connections does): the task looks it up and
hands it to the spark-submitted driver (plugins/streaming/job_connections.py).

A metadata DB of its own in tmp_path (a copy of the session's freshly migrated one), the session's broker (tests/conftest.py) and its own topic and lake;
``$AIRFLOW_CONN_CLOUDTRAIL_KAFKA`` is removed from the runs' environment. Without the connection the task
fails before any spark-submit, naming it; with it, the table holds exactly the topic's good events and the
quarantine its bad messages, and the connection's secret is in no log line.
"""

from __future__ import annotations

import json
import time

import pytest

from tools.kafka_broker import create_topic
from spark_jobs.model.kafka_connection import env_var
from tools.kafka_messages import produce, sample_messages
from spark_jobs.registry import get_job
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.catchup_runs import CatchupRuns, tail

JOB = get_job("cloudtrail_kafka")
DAG_ID = f"{JOB.name}_catchup"
TOPIC = "ct-dag"
SECRET = "dag-truststore-secret-7c2e"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, kafka_broker, migrated_db) -> CatchupRuns:
    require_airflow_env()
    runs = CatchupRuns(tmp_path_factory.mktemp("kafka_catchup_dag"), migrated_db)
    runs.env.pop(env_var(JOB.source.connection_id), None)  # only the metadata DB will have it
    runs.env[JOB.input_env_var] = TOPIC
    return runs


def _duckdb(runs: CatchupRuns, sql: str) -> list[dict]:
    done = runs.run("python", "-m", "spark_jobs", "sql", "--engine", "duckdb", "--lake", str(runs.lake),
                    "--format", "json", sql)
    assert done.returncode == 0, f"query failed (exit {done.returncode}):\n{tail(done)}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_without_its_connection_the_task_fails_before_spark_submit_naming_it(runs):
    done = runs.run("airflow", "dags", "test", DAG_ID)
    output = done.stdout + done.stderr
    assert "Airflow has no connection 'cloudtrail_kafka': add it under Admin > Connections" in output, tail(done)
    assert "Spark-Submit cmd" not in output  # the hook never built a command
    assert not (runs.lake / "tables" / "cloudtrail_events").exists()


def test_a_connection_kept_in_airflows_db_reaches_the_driver_and_the_tables_are_exact(runs, kafka_broker):
    now_ms = int(time.time() * 1000)
    create_topic(kafka_broker.bootstrap_servers, TOPIC, 2)
    sample = sample_messages(60, 0.1, 3, 2, [now_ms - 60_000], seed=5)
    produce(kafka_broker.bootstrap_servers, TOPIC, sample.messages)
    connection = {"conn_type": "kafka", "host": kafka_broker.bootstrap_servers,
                  "extra": {"ssl.truststore.password": SECRET}}  # a secret the PLAINTEXT client ignores
    added = runs.run("airflow", "connections", "add", JOB.source.connection_id, "--conn-json", json.dumps(connection))
    assert added.returncode == 0, tail(added)

    done = runs.run("airflow", "dags", "test", DAG_ID)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Spark-Submit cmd" in output, tail(done)
    assert SECRET not in output

    events = [r["eventID"] for r in _duckdb(runs, "SELECT eventID FROM cloudtrail_events")]
    assert len(events) == len(set(events)) == len(sample.good_ids) == 54
    assert set(events) == sample.good_ids
    quarantined = _duckdb(runs, "SELECT topic, \"partition\", \"offset\" FROM cloudtrail_kafka_quarantine")
    assert sorted((r["topic"], r["partition"], r["offset"]) for r in quarantined) == \
        sorted((TOPIC, m.partition, m.offset) for m in sample.bad)
