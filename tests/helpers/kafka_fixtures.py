"""The Kafka fixtures: one real broker per test session (a JVM), and the Kafka job run in-process against it.

The broker is started by the first test that asks for it (the Kafka job's tests and its catch-up DAG's), on free
loopback ports, and the job's Airflow connection points at it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from spark_jobs.model.triggers import parse_trigger

KAFKA_JOB = get_job("cloudtrail_kafka")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A broker on free loopback ports; the job's Airflow connection points at it. Stopped (and checked gone) after."""
    from tools.kafka_broker import LocalBroker
    from spark_jobs.model.kafka_connection import env_var

    variable = env_var(KAFKA_JOB.source.connection_id)
    broker = LocalBroker(tmp_path_factory.mktemp("kafka-broker")).start()
    old = os.environ.get(variable)
    os.environ[variable] = json.dumps({"conn_type": "kafka", "host": broker.bootstrap_servers})
    try:
        yield broker
    finally:
        if old is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = old
        pid = broker.process.pid
        broker.stop()
        assert not _alive(pid), f"the Kafka broker (pid {pid}) is still running"


@pytest.fixture(scope="session")
def run_kafka_job(spark, kafka_broker):
    """Run cloudtrail_kafka in this process: ``run_kafka_job(topics, lake, trigger=..., **source_options)``."""
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming

    def run(topics: str, lake_root: Path, trigger: str = "available-now", **options: str):
        run_options = RunOptions(Path(topics), Lake(Path(lake_root)), parse_trigger(trigger),
                                 {**KAFKA_JOB.file_source_options, **options}, lease_ttl_seconds=5)
        return run_streaming(KAFKA_JOB, run_options, spark=spark)

    return run
