"""Fixtures shared by the whole suite: one real local SparkSession, one real Kafka broker, the project's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
REAL_CLOUDTRAIL = PROJECT_ROOT.parent / "shared" / "data" / "real" / "cloudtrail"
REQUIRED_ENV = ("AIRFLOW_HOME", "PYSPARK_PYTHON", "SPARK_LOCAL_DIRS")


def pytest_configure(config):
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.exit(f"the test environment is not set ({', '.join(missing)} missing): run the tests "
                    "with `make test` (pass options as `make test PYTEST_ARGS='-k name'`)", returncode=4)


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the in-process tests (a start costs ~10 s)."""
    from spark_jobs.driver.session import build_session

    session = build_session("tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def real_cloudtrail() -> Path:
    """The real CloudTrail samples beside the project (CI always has them)."""
    if not REAL_CLOUDTRAIL.is_dir():
        pytest.skip(f"real CloudTrail samples not found at {REAL_CLOUDTRAIL} (they sit beside the "
                    "project in ../shared/data/real; CI always has them)")
    return REAL_CLOUDTRAIL


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
    from spark_jobs.registry import get_job

    variable = env_var(get_job("cloudtrail_kafka").source.connection_id)
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


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m spark_jobs ARGS`` in a subprocess, as a person would run it."""
    return subprocess.run([sys.executable, "-m", "spark_jobs", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
