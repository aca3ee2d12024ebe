"""streaming_oncall run for real by ``airflow dags test``: rollback_table, a damaged table healed by
reprocess_from, a dry run, a refusal and reset_checkpoint, every one a row of ops_audit.

rollback_table, reprocess_from and reset_checkpoint wait for a second user's approval: ``dags test`` keeps the run
alive while its task waits (Airflow's human-in-the-loop), and an API server on the same metadata DB (only the
``api-server`` of :class:`tools.local_airflow.LocalAirflow`) takes bob's approval through the REST API with his
token, as the UI's Required Actions page would; the requester is ``dags test``'s own user (``dag_test``).

The lake is filled in this process (the shared SparkSession runs the job once), then a "bad deploy"
appends two junk rows (delta-rs); the DAG's actions run as Airflow runs them: the task checks the form,
spark-submits ``lake restore`` / ``reprocess``, and appends the audit row with delta-rs. The input, by
delivery time (the object name's timestamp):

- ``a`` 2024-03-01 08:00: a1, a2 (events of 03-01)
- ``b`` 2024-03-02 09:00: b1, b2 (03-02)
- ``c`` 2024-03-02 18:00: c1 (03-01: a late delivery), c2 (03-02), a1 again (delivered twice)
- ``bad`` 2024-03-02 19:00: not JSON (quarantined)
- ``d`` 2024-03-03 01:00: d1 (03-03), d2 (03-02)
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.lease import Lease
from spark_jobs.model.lake import Lake
from spark_jobs.control.oncall.approval import needs_approval
from spark_jobs.control.oncall.audit import read_rows
from tests.helpers.approvals import UserApi, pending, user_settings
from tests.helpers.airflow_fixtures import fresh_airflow_home, require_airflow_env
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.real_airflow import wait_for

DAG_ID = "streaming_oncall"
JOB = "cloudtrail_etl"
FOLDER = "AWSLogs/123456789012/CloudTrail/us-east-1"
FILES = {
    f"{FOLDER}/2024/03/01/123456789012_CloudTrail_us-east-1_20240301T0800Z_a.json.gz":
        [("a1", "2024-03-01T08:01:00Z"), ("a2", "2024-03-01T08:02:00Z")],
    f"{FOLDER}/2024/03/02/123456789012_CloudTrail_us-east-1_20240302T0900Z_b.json.gz":
        [("b1", "2024-03-02T09:01:00Z"), ("b2", "2024-03-02T09:02:00Z")],
    f"{FOLDER}/2024/03/02/123456789012_CloudTrail_us-east-1_20240302T1800Z_c.json.gz":
        [("c1", "2024-03-01T10:00:00Z"), ("c2", "2024-03-02T18:01:00Z"), ("a1", "2024-03-01T08:01:00Z")],
    f"{FOLDER}/2024/03/03/123456789012_CloudTrail_us-east-1_20240303T0100Z_d.json.gz":
        [("d1", "2024-03-03T01:01:00Z"), ("d2", "2024-03-02T23:59:00Z")],
}
BAD = f"{FOLDER}/2024/03/02/123456789012_CloudTrail_us-east-1_20240302T1900Z_bad.json.gz"
EVENTS = sorted([("a1", "2024-03-01"), ("a2", "2024-03-01"), ("b1", "2024-03-02"), ("b2", "2024-03-02"),
                 ("c1", "2024-03-01"), ("c2", "2024-03-02"), ("d1", "2024-03-03"), ("d2", "2024-03-02")])
JUNK = [("junk-1", "2024-03-02"), ("junk-2", "2024-03-02")]


def land(landing: Path, files: dict) -> None:
    for name, records in files.items():
        document = {"Records": [{"eventVersion": "1.08", "eventID": event_id, "eventTime": event_time,
                                 "eventSource": "s3.amazonaws.com", "eventName": "GetObject",
                                 "awsRegion": "us-east-1"} for event_id, event_time in records]}
        (landing / name).parent.mkdir(parents=True, exist_ok=True)
        (landing / name).write_bytes(gzip.compress(json.dumps(document).encode()))


def tail(done: subprocess.CompletedProcess, lines: int = 60) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])


class Oncall:
    """The landing folder, the lake and an Airflow home in tmp_path, and the DAG run against them."""

    def __init__(self, root: Path, migrated_db: Path) -> None:
        self.landing, self.lake, self.home = root / "landing", Lake(root / "lake"), root / "airflow_home"
        fresh_airflow_home(migrated_db, self.home)
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            # No API server here: an action that needs one is refused, never sent to another Airflow.
            "AIRFLOW__API__BASE_URL": "http://127.0.0.1:9/",
            "LAKE_ROOT": str(self.lake.root),
            "CLOUDTRAIL_ETL_INPUT": str(self.landing),
            # The users every component of one Airflow shares: the task assigns a request to those who may answer.
            **user_settings(self.home),
        }
        # The API server that takes approvals: same metadata DB, the same users as the approval tests.
        from tools.local_airflow import LocalAirflow, free_port

        self.approvals = LocalAirflow(self.home, free_port(29300), {
            k: v for k, v in self.env.items() if k != "AIRFLOW__API__BASE_URL"}, components=("api-server",))
        self.approved: list[dict] = []

    def run(self, *command: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), cwd=PROJECT_ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def act(self, **conf) -> subprocess.CompletedProcess:
        """``airflow dags test`` of the form ``conf``; an action that needs approval is approved by bob when its
        task waits for it."""
        command = ["airflow", "dags", "test", DAG_ID, "-c", json.dumps({"job": JOB, **conf})]
        if conf.get("dry_run") or not needs_approval(conf["action"]):
            return self.run(*command)
        with subprocess.Popen(command, cwd=PROJECT_ROOT, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) as process:
            bob = UserApi(self.approvals.url, "bob")

            def waiting():  # the required action, or "ended": refused before asking (nothing to approve)
                return "ended" if process.poll() is not None else pending(bob, DAG_ID)

            try:
                found = wait_for(f"the required action of {conf['action']}", waiting, every=0.5)
                if found != "ended":
                    [detail] = found
                    status, answered = bob.answer(DAG_ID, detail["task_instance"]["dag_run_id"], "act", "Approve")
                    assert status == 200, answered
                    self.approved.append(answered)
                output, _ = process.communicate(timeout=900)
            finally:
                if process.poll() is None:
                    process.kill()
            return subprocess.CompletedProcess(command, process.returncode, output, "")

    def events(self, spark, version: int | None = None) -> list[tuple[str, str]]:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        frame = reader.load(str(self.lake.table_path("cloudtrail_events")))
        return sorted((r.eventID, str(r.date)) for r in frame.select("eventID", "date").collect())

    def audit(self) -> list[dict]:
        return read_rows(self.lake)


def bad_deploy(lake: Lake) -> None:
    """Two junk rows appended to cloudtrail_events as a broken job version might (one delta-rs commit)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = str(lake.table_path("cloudtrail_events"))
    schema = DeltaTable(path).schema().to_arrow()
    rows = [{"eventID": i, "date": dt.date.fromisoformat(d)} for i, d in JUNK]
    write_deltalake(path, pa.Table.from_pylist(rows, schema=pa.schema(schema)), mode="append")


@pytest.fixture(scope="module")
def oncall(tmp_path_factory, run_job, spark, migrated_db):
    """A lake after one run of the job over every file (version 1) and a bad deploy's commit (version 2)."""
    require_airflow_env()
    oncall = Oncall(tmp_path_factory.mktemp("oncall_dag"), migrated_db)
    land(oncall.landing, FILES)
    (oncall.landing / BAD).write_bytes(gzip.compress(b'{"Records": [ not json ]}'))
    run_job(oncall.landing, oncall.lake.root)
    bad_deploy(oncall.lake)
    oncall.approvals.start()
    try:
        yield oncall
    finally:
        oncall.approvals.stop(grace=10)


@pytest.fixture(scope="module")
def rolled_back(oncall, spark):
    """rollback_table of cloudtrail_events to version 1 (the first run), by the DAG."""
    before = oncall.events(spark)
    done = oncall.act(action="rollback_table", table="cloudtrail_events", table_version=1,
                      reason="a bad deploy wrote version 2")
    assert done.returncode == 0, f"rollback_table failed:\n{tail(done)}"
    return {"before": before, "after": oncall.events(spark), "version_1": oncall.events(spark, 1)}


@pytest.fixture(scope="module")
def reprocessed(oncall, rolled_back, spark):
    """A partition of cloudtrail_events deleted by hand, a dry run, then reprocess_from 2024-03-02T00:00 by the DAG."""
    partition = oncall.lake.table_path("cloudtrail_events") / "date=2024-03-02"
    deleted = sorted(p.name for p in partition.glob("*.parquet"))
    for name in deleted:
        (partition / name).unlink()
    conf = dict(action="reprocess_from", from_time="2024-03-02T00:00:00Z", reason="date=2024-03-02 deleted by hand")
    dry = oncall.act(**conf, dry_run=True)
    done = oncall.act(**conf)
    assert done.returncode == 0, f"reprocess_from failed:\n{tail(done)}"
    return {"deleted": deleted, "dry": dry, "done": done, "events": oncall.events(spark)}


def test_rollback_table_returns_the_exact_rows_of_the_earlier_version(oncall, rolled_back):
    assert rolled_back["before"] == sorted(EVENTS + JUNK)
    assert rolled_back["after"] == rolled_back["version_1"] == EVENTS
    [row] = [r for r in oncall.audit() if r["action"] == "rollback_table"]
    assert (row["outcome"], row["triggered_by"], row["dag_id"], row["reason"]) == (
        "succeeded", "dag_test", DAG_ID, "a bad deploy wrote version 2")
    assert (row["decision"], row["decided_by"]) == ("approved", "bob")  # four eyes: dag_test asked, bob approved
    assert json.loads(row["parameters"]) == {"job": JOB, "action": "rollback_table", "dry_run": False,
                                             "table": "cloudtrail_events", "table_version": 1}
    assert row["versions_before"] == {"cloudtrail_events": 2, "cloudtrail_quarantine": 1}
    assert row["versions_after"] == {"cloudtrail_events": 3, "cloudtrail_quarantine": 1}


def test_reprocess_from_heals_a_damaged_partition_to_the_exact_output(oncall, reprocessed, spark):
    assert reprocessed["deleted"]  # the partition's files were gone before
    assert reprocessed["events"] == EVENTS  # every event once, none missing: as if processed once
    frame = spark.read.format("delta").load(str(oncall.lake.table_path("cloudtrail_events")))
    sources = {r.eventID: r._source_file.rsplit("_", 1)[-1] for r in frame.collect()}
    assert sources["a1"] == "a.json.gz"  # the first delivery (before the replay's time) is kept
    quarantine = spark.read.format("delta").load(str(oncall.lake.table_path("cloudtrail_quarantine"))).collect()
    assert [(r.source_file.rsplit("_", 1)[-1], r.reason, r.record_index) for r in quarantine] == [
        ("bad.json.gz", "invalid_json", None)]


def test_reprocess_dry_run_says_what_it_would_do_and_does_nothing(oncall, reprocessed):
    assert reprocessed["dry"].returncode == 0, tail(reprocessed["dry"])
    dry, done = [r for r in oncall.audit() if r["action"] == "reprocess_from"]
    assert (dry["outcome"], dry["dry_run"], dry["decision"]) == ("dry_run", True, None)  # a dry run waits for nobody
    assert dry["versions_after"] == dry["versions_before"] == done["versions_before"]
    assert "replay 4 input files of" in dry["message"]
    assert re.search(r"damaged: cloudtrail_events partition date=2024-03-02: \d+ files in the Delta log are missing "
                     r"on disk", dry["message"]), dry["message"]
    assert (done["outcome"], done["dry_run"], done["decision"], done["decided_by"]) == (
        "succeeded", False, "approved", "bob")
    assert done["versions_after"] == {"cloudtrail_events": done["versions_before"]["cloudtrail_events"] + 1,
                                      "cloudtrail_quarantine": done["versions_before"]["cloudtrail_quarantine"] + 1}


def test_an_action_that_does_not_fit_is_refused_runs_nothing_and_is_audited(oncall, reprocessed):
    before = [r["audit_id"] for r in oncall.audit()]
    holder = Lease.acquire(str(oncall.lake.control_path(JOB)), JOB, 60, details={"holder": "a driver"})
    try:
        done = oncall.act(action="reset_checkpoint", reason="start over")
    finally:
        holder.release()
    assert done.returncode == 0  # refused, not failed: the task is skipped
    with sqlite3.connect(oncall.home / "airflow.db") as db:
        [(state,)] = db.execute("SELECT ti.state FROM task_instance ti JOIN dag_run dr ON dr.dag_id = ti.dag_id AND "
                                "dr.run_id = ti.run_id WHERE ti.dag_id = ? ORDER BY dr.id DESC LIMIT 1",
                                (DAG_ID,)).fetchall() or [(None,)]
    assert state == "skipped"
    assert ("on-call action refused, nothing was run: action: reset_checkpoint does not fit the state of "
            f"cloudtrail_etl: a driver holds the checkpoint (pid {os.getpid()}") in done.stdout + done.stderr
    assert "spark-submit" not in done.stdout + done.stderr
    assert oncall.lake.checkpoint_path(JOB).is_dir()  # not moved
    [row] = [r for r in oncall.audit() if r["audit_id"] not in before]
    assert (row["action"], row["outcome"]) == ("reset_checkpoint", "refused")
    assert row["message"].startswith("action: reset_checkpoint does not fit the state of cloudtrail_etl")
    assert row["versions_after"] == row["versions_before"]


def test_reset_checkpoint_backs_it_up_and_the_fresh_run_after_it_adds_nothing(oncall, reprocessed, run_job, spark):
    before = oncall.events(spark)
    done = oncall.act(action="reset_checkpoint", reason="the checkpoint of a bad deploy")
    assert done.returncode == 0, tail(done)
    [backup] = sorted((oncall.lake.control_path(JOB) / "backups").glob("*-reset/checkpoint"))
    assert (backup / "metadata").is_file() and not oncall.lake.checkpoint_path(JOB).exists()

    again = run_job(oncall.landing, oncall.lake.root)  # a new checkpoint: every input file read again

    assert again.input_files == len(FILES) + 1
    assert again.rows == {"cloudtrail_events": 0, "cloudtrail_quarantine": 0}  # the tables stay exact
    assert oncall.events(spark) == before == EVENTS
    [row] = [r for r in oncall.audit() if r["action"] == "reset_checkpoint" and r["outcome"] == "succeeded"]
    assert str(backup) in row["message"]


def test_the_audit_is_readable_without_a_jvm(oncall, reprocessed):
    done = subprocess.run([sys.executable, "-m", "spark_jobs", "sql", "--engine", "duckdb", "--format", "json",
                           "SELECT action, outcome FROM ops_audit ORDER BY time"], cwd=PROJECT_ROOT,
                          env=oncall.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()][:3] == [
        {"action": "rollback_table", "outcome": "succeeded"}, {"action": "reprocess_from", "outcome": "dry_run"},
        {"action": "reprocess_from", "outcome": "succeeded"}]
