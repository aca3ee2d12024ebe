"""JobSubmitOperator, the spark_submit task of the catch-up and backfill DAGs: a catch-up run refused by the
continuous driver's lease is skipped saying who owns the job; any other refusal stays a failure, recorded with the
driver's own reason.

The driver is the real ``python -m spark_jobs run`` (its lease is taken before Spark starts: refused, it exits 3
with its one-line error); only ``spark-submit`` is a stand-in on PATH that runs the application with this
Python (no JVM). The lease holder is a stand-in driver (tests/helpers/lease_holder.py); the task's
context is the few fields the operator reads.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import subprocess
import sys
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Iterator

import pytest

from spark_jobs.control.monitoring.runs import read_runs
from spark_jobs.launch.submit import Submission
from spark_jobs.model.lake import Lake
from streaming.operators.job_submit import JobSubmitOperator
from tests.helpers.processes import lease_holder

JOB = "cloudtrail_etl"
STAND_IN = """#!{python}
import os, sys
args = sys.argv[1:]
application = next(i for i, a in enumerate(args) if a.endswith("spark_jobs/__main__.py"))
os.execv(sys.executable, [sys.executable, *args[application:]])
"""


class Ti:
    """The task instance's fields the operator reads and writes."""

    def __init__(self, plan: dict | None) -> None:
        self.plan, self.pushed = plan, {}
        self.try_number, self.start_date = 1, dt.datetime.now(dt.timezone.utc)

    def xcom_pull(self, task_ids: str):
        return self.plan

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value


@pytest.fixture
def lake(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "spark-submit").write_text(STAND_IN.format(python=sys.executable))
    (folder / "spark-submit").chmod(stat.S_IRWXU)
    (tmp_path / "landing").mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT", str(tmp_path / "landing"))
    return Lake(tmp_path / "lake")


@contextmanager
def holding(lake: Lake, trigger: str) -> Iterator[subprocess.Popen]:
    """A driver that holds the job's lease with ``trigger`` while the block runs."""
    process = subprocess.Popen(lease_holder(lake.control_path(JOB), -1, 0, ttl=30, trigger=trigger),
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().startswith("holding lease generation")
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def submit(retries: int = 2) -> tuple[JobSubmitOperator, dict]:
    operator = JobSubmitOperator(task_id="spark_submit", job=JOB, retries=retries,
                                 **Submission.of(["run", JOB, "--trigger", "available-now"], name=JOB).operator_kwargs())
    context = {"ti": Ti({"kind": "live", "args": []}),
               "dag_run": SimpleNamespace(dag_id=f"{JOB}_catchup", run_id="asset_triggered__1")}
    return operator, context


def test_a_catchup_run_refused_by_the_continuous_drivers_lease_is_skipped_saying_who_owns_the_job(lake):
    from airflow.sdk.exceptions import AirflowSkipException

    operator, context = submit()
    with holding(lake, "processing-time:10s") as driver, pytest.raises(AirflowSkipException) as skipped:
        operator.execute(context)
    said = str(skipped.value)
    assert said.startswith(f"{JOB} is owned by the continuous driver pid {driver.pid} on host ")
    assert said.endswith("; its files are ingested there (this run's driver was refused by its lease: exit status 3)")
    assert context["ti"].pushed["owned_by"] == said.split(" (this run's")[0]
    assert read_runs(str(lake.control_path(JOB))) == []  # not a run of the job: nothing to record


def test_a_lease_held_by_anyone_else_stays_a_failure_recorded_with_the_drivers_reason(lake):
    from airflow.sdk.exceptions import AirflowException

    operator, context = submit(retries=2)
    with holding(lake, "available-now") as holder, pytest.raises(AirflowException) as failed:  # a run started by hand
        operator.execute(context)
    assert "Error code is: 3" in str(failed.value)
    [record] = read_runs(str(lake.control_path(JOB)))
    assert (record["kind"], record["dag_id"], record["run_id"], record["try_number"], record["outcome"]) == (
        "catch-up", f"{JOB}_catchup", "asset_triggered__1", 1, "retrying")  # try 1 of 3: Airflow retries it
    assert record["reason"].startswith(f"error: job {JOB} is already running: its checkpoint is held by pid "
                                       f"{holder.pid} on host ")
    assert (record["files"], record["rows"], record["batches"]) == (0, {}, 0)
