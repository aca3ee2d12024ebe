"""cloudtrail_etl_backfill run for real by ``airflow dags test`` with a form's values: real Spark, real samples.

The runs use a copy of the session's freshly migrated metadata DB and a lake in tmp_path (as the
catch-up DAG's tests do); the tables are read in the session's SparkSession.
The job's input roots are the real samples' folder (``$CLOUDTRAIL_ETL_INPUT_ROOTS``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess

import pytest

from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.catchup_runs import CatchupRuns, table_files, tail

DAG_ID = "cloudtrail_etl_backfill"
# 28,992 distinct eventIDs, plus the record salvaged from the invalid file (see test_real_cloudtrail_samples).
REAL_EVENTS = 28992 + 1


class BackfillRuns(CatchupRuns):
    """The catch-up tests' Airflow home and lake, running the backfill DAG with a form's values."""

    def backfill(self, **params) -> subprocess.CompletedProcess:
        return self.run("airflow", "dags", "test", DAG_ID, "-c", json.dumps(params))

    def task_states(self) -> list[dict[str, str]]:
        """Per run (oldest first): task id -> state."""
        with sqlite3.connect(self.home / "airflow.db") as db:
            runs = [r[0] for r in db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id", (DAG_ID,))]
            return [dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                                    (DAG_ID, run_id))) for run_id in runs]

    def counts(self, spark) -> dict:
        [row] = self.query(spark, "SELECT (SELECT count(*) FROM cloudtrail_events) AS events, "
                                  "(SELECT count(DISTINCT eventID) FROM cloudtrail_events) AS distinct_ids, "
                                  "(SELECT count(*) FROM cloudtrail_quarantine) AS quarantined")
        return row


@pytest.fixture(scope="module")
def runs(tmp_path_factory, real_cloudtrail, migrated_db) -> BackfillRuns:
    require_airflow_env()
    runs = BackfillRuns(tmp_path_factory.mktemp("backfill_dag"), migrated_db)
    runs.env["CLOUDTRAIL_ETL_INPUT_ROOTS"] = str(real_cloudtrail.parent)
    return runs


@pytest.fixture(scope="module")
def first(runs, real_cloudtrail, spark):
    """A backfill of every real sample, then the same backfill again."""
    done = runs.backfill(source=str(real_cloudtrail), max_files_per_trigger=500, dry_run=False)
    assert done.returncode == 0, f"airflow dags test {DAG_ID} failed (exit {done.returncode}):\n{tail(done)}"
    first = {"counts": runs.counts(spark), "files": table_files(runs.lake), "output": done.stdout + done.stderr}
    again = runs.backfill(source=str(real_cloudtrail), max_files_per_trigger=500, dry_run=False)
    assert again.returncode == 0, f"the second backfill failed (exit {again.returncode}):\n{tail(again)}"
    return {**first, "again_files": table_files(runs.lake), "states": runs.task_states()}


def test_a_backfill_of_the_real_samples_holds_each_event_once(first):
    assert first["counts"] == {"events": REAL_EVENTS, "distinct_ids": REAL_EVENTS, "quarantined": 1}
    assert first["states"][0] == {"check_request": "success", "unless_dry_run": "success", "spark_submit": "success"}
    assert "progress: 1239 of 1239 files (100%)" in first["output"]


def test_the_backfill_driver_and_every_thread_of_its_spark_submit_jvm_run_at_idle_priority(first):
    # The Python driver is spark-submit's child: it put itself and each thread of the JVM under SCHED_IDLE
    # before Spark started (the registry's backfill_priority).
    found = re.search(r"running at priority idle \(the live job keeps priority\): \{'priority': 'idle', 'pid': \d+, "
                      r"'jvm_pid': (\d+), 'jvm_threads': (\d+)\}", first["output"])
    assert found, "no priority line in the task log"
    assert int(found.group(2)) >= 10  # a JVM runs dozens of threads at that point


def test_running_the_same_backfill_again_adds_nothing(first):
    assert first["states"][1]["spark_submit"] == "success"
    assert first["again_files"] == first["files"]


def test_a_dry_run_lists_the_files_of_its_range_and_writes_nothing(runs, first, real_cloudtrail):
    done = runs.backfill(source=str(real_cloudtrail), date_from="2023-07-10", date_to="2023-07-10", dry_run=True)
    assert done.returncode == 0, tail(done)
    assert runs.task_states()[-1] == {"check_request": "success", "unless_dry_run": "success",
                                      "spark_submit": "skipped"}
    output = done.stdout + done.stderr
    # the folder read is the one checked: where a symlink (a user's ../shared) leads
    assert f"backfill of cloudtrail_etl: 55 files to load from {real_cloudtrail.resolve()} (1113 out of the range, 71 " \
           "without a date)" in output
    assert table_files(runs.lake) == first["again_files"]


def test_a_refused_request_ends_refused_naming_the_field_and_runs_nothing(runs, first, real_cloudtrail):
    # One refusal through the DAG (its check_request task); every field's refusals are in
    # tests/spark_jobs/control/catchup/test_backfill_requests.py::test_each_bad_field_is_refused_by_name.
    done = runs.backfill(source=str(real_cloudtrail), date_from="2023-07-11", date_to="2023-07-10", dry_run=False)
    assert done.returncode == 0, tail(done)
    assert "backfill refused, nothing was run: date_to: 2023-07-10 is before date_from 2023-07-11: the range runs " \
           "backwards" in done.stdout + done.stderr
    assert runs.task_states()[-1] == {"check_request": "skipped", "unless_dry_run": "skipped",
                                      "spark_submit": "skipped"}
    assert table_files(runs.lake) == first["again_files"]


def test_a_request_without_dry_run_is_a_dry_run_the_plan_shows_first(runs, first, real_cloudtrail):
    done = runs.backfill(source=str(real_cloudtrail), date_from="2023-07-10", date_to="2023-07-10")
    assert done.returncode == 0, tail(done)
    assert runs.task_states()[-1] == {"check_request": "success", "unless_dry_run": "success",
                                      "spark_submit": "skipped"}
    assert table_files(runs.lake) == first["again_files"]


def test_the_form_refuses_values_outside_its_schema_before_a_run_starts(runs, first, real_cloudtrail):
    before = len(runs.task_states())
    for params, message in [
        ({"source": "relative/path"}, "Invalid input for param source: 'relative/path' does not match"),
        ({"source": "/etc"}, "Invalid input for param source: '/etc' does not match"),  # outside the roots
        ({"source": str(real_cloudtrail), "max_files_per_trigger": 0},
         "Invalid input for param max_files_per_trigger: 0 is less than the minimum of 1"),
    ]:
        done = runs.backfill(**params)
        assert done.returncode != 0
        assert message in done.stdout + done.stderr
    assert len(runs.task_states()) == before
