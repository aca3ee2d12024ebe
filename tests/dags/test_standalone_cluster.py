"""The same DAG and the same supervised job on a real Spark standalone cluster, by switching only spark_default.

One master and one worker (2 cores, 1 GiB for executors) are started on 127.0.0.1 from the pip Spark
for the module (:class:`tools.standalone.StandaloneCluster`); the worker's environment has no
``PYTHONPATH``, so its executors can only run the project's code from the zip the driver ships. Then,
on one lake and one landing folder:

1. ``airflow dags test cloudtrail_etl_catchup`` with ``AIRFLOW_CONN_SPARK_DEFAULT`` pointing at the
   master (nothing else changed): the run is an application of the cluster, its executor fetched the
   code zip of the current code;
2. the continuous job under the supervisor, with the spark-submit command the ``<job>_continuous``
   DAG's operator builds from the same connection (client mode): kill -9 of the driver's JVM, the
   master removes its application and the worker its executors (no process left), the supervisor
   restarts the driver, which takes the lease over and catches up; then a graceful stop;
3. the same landing folder in local mode (the session's ``local[2]`` SparkSession): both tables are
   row for row the same (the quarantine's ingestion time aside), and every good event is there once.

Nothing of the cluster, its applications or the drivers is left running (process table).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from spark_jobs.launch import code_zip
from tools.bench.supervised_job import committed_files
from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tools.sample_data import write_sample_landing
from tools.standalone import StandaloneCluster, connection_json, executor_processes
from spark_jobs.control.supervision.child import group_members
from spark_jobs.control.supervision.supervisor import Supervisor
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.catchup_runs import CatchupRuns, tail
from tests.helpers.processes import batch_ids, table_event_ids, wait_for

JOB = get_job("cloudtrail_etl")
POLICY = replace(JOB.restart, initial_backoff_seconds=1, max_backoff_seconds=5, window_seconds=600, poll_seconds=0.5,
                 stop_grace_seconds=90, warm_standby=False)
WAIT = 360  # seconds: a spark-submit and a first Delta batch take minutes on this loaded 2-core machine
# A worker stops an ended application's executor by destroying its process, forcibly after its
# ExecutorRunner's EXECUTOR_TERMINATE_TIMEOUT_MS (10 s); the executor's Python workers end with it.
EXECUTOR_EXIT = 30


def spark_submits() -> list[psutil.Process]:
    """Live spark-submit JVMs started by this test process (the session's own local SparkSession aside)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            argv = child.cmdline()
            if (child.status() != psutil.STATUS_ZOMBIE and "org.apache.spark.deploy.SparkSubmit" in argv
                    and "pyspark-shell" not in argv):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def left_after(pids: set[int], seconds: float) -> list[int]:
    """The processes of ``pids`` still alive (not zombies) after waiting up to ``seconds`` for them to end."""
    def alive() -> list[int]:
        found = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    found.append(pid)
            except psutil.NoSuchProcess:
                pass
        return sorted(found)

    deadline = time.monotonic() + seconds
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive()


def apps(cluster: StandaloneCluster, kind: str) -> dict[str, dict]:
    """id -> application of the master's ``activeapps`` or ``completedapps``."""
    return {app["id"]: app for app in cluster.master_state()[kind]}


class ClusterRun:
    """The cluster, a landing folder and a lake, and the environment that points Airflow at the cluster."""

    def __init__(self, root: Path, cluster: StandaloneCluster, migrated_db: Path) -> None:
        self.root, self.cluster = root, cluster
        self.airflow = CatchupRuns(root, migrated_db)
        self.airflow.env["AIRFLOW_CONN_SPARK_DEFAULT"] = connection_json(cluster.host, cluster.port)
        self.landing, self.lake = self.airflow.landing, self.airflow.lake
        self.checkpoint = self.lake / "checkpoints" / JOB.name
        self.good: list[str] = []
        self.files: list[Path] = []

    def land(self, name: str, seed: int, bad_files: bool = False) -> None:
        manifest = write_sample_landing(self.landing / name, files=3, records_per_file=6, seed=seed,
                                        include_bad_files=bad_files)
        self.good += manifest.good_event_ids
        self.files += manifest.files_written

    def caught_up(self) -> bool:
        return ({p.name for p in self.files} <= committed_files(self.checkpoint)
                and batch_ids(self.checkpoint / "offsets") == batch_ids(self.checkpoint / "commits"))


@pytest.fixture(scope="module")
def run(tmp_path_factory, migrated_db):
    require_airflow_env()
    root = tmp_path_factory.mktemp("standalone")
    cluster = StandaloneCluster(root / "cluster", worker_cores=2, worker_memory="1g")
    cluster.start()
    try:
        yield ClusterRun(root, cluster, migrated_db)
    finally:
        pgids = cluster.pgids
        cluster.stop()
    # The executors (and their Python workers) are the worker's children, in its process group.
    assert [pid for pgid in pgids for pid in group_members(pgid)] == []


@pytest.fixture(scope="module")
def catchup(run):
    """cloudtrail_etl_catchup by `airflow dags test`, its spark_default pointing at the cluster."""
    run.land("a", seed=61, bad_files=True)
    done = run.airflow.dags_test()
    assert done.returncode == 0, f"airflow dags test on the cluster failed:\n{tail(done)}"
    finished = [app for app in run.cluster.master_state()["completedapps"] if app["name"] == JOB.name]
    return {"done": done, "apps": finished, "events": Counter(table_event_ids(run.lake))}


def test_the_catchup_dag_runs_on_the_cluster_by_switching_only_the_connection(run, catchup):
    [app] = catchup["apps"]
    assert app["state"] == "FINISHED"
    [submitted] = [line for line in (catchup["done"].stdout + catchup["done"].stderr).splitlines()
                   if "Spark-Submit cmd:" in line]
    assert f"--master {run.cluster.master_url} " in submitted and " --deploy-mode client " in submitted
    assert catchup["events"] == Counter(run.good)
    assert run.caught_up()


def test_the_executors_ran_the_zip_of_the_current_code(run, catchup):
    [app] = catchup["apps"]
    shipped = sorted(p.name for p in run.cluster.work_dir.glob(f"{app['id']}/*/spark_jobs-*.zip"))
    assert shipped == [code_zip.zip_name()]


@pytest.fixture(scope="module")
def supervised(run, catchup):
    """The continuous job on the cluster under the supervisor: kill -9 of the driver JVM, restart, stop."""
    from streaming.operators.supervisor import StreamingSupervisorOperator

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", run.airflow.env["AIRFLOW_CONN_SPARK_DEFAULT"])
        command = StreamingSupervisorOperator(task_id="supervise", job=JOB.name).driver_command(
            "processing-time:1s", str(run.landing))
    events: list[dict] = []
    stop = threading.Event()
    supervisor = Supervisor(JOB, Lake(run.lake), command, POLICY, notify=events.append, should_stop=stop.is_set,
                            input_path=str(run.landing), env=run.airflow.env, cwd=str(PROJECT_ROOT))
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(outcome=supervisor.run()), daemon=True)
    control = str(Lake(run.lake).control_path(JOB.name))
    seen: dict = {}
    run.land("b", seed=62)
    thread.start()
    try:
        [first_app] = wait_for(lambda: list(apps(run.cluster, "activeapps")), WAIT, "its application on the master")
        executors = wait_for(lambda: executor_processes(first_app), 60, "its executor on the worker")
        wait_for(lambda: (lease := read_lease(control)) and not lease.released and lease.generation > 1, 60,
                 "the driver's lease")
        seen["first_app"], seen["first_lease"] = first_app, read_lease(control)
        seen["executor_tree"] = {p.pid for pid in executors for p in [psutil.Process(pid), *psutil.Process(pid).children(True)]}

        os.kill(supervisor.driver.pid, signal.SIGKILL)  # the spark-submit JVM: the driver, in client mode

        wait_for(lambda: first_app in apps(run.cluster, "completedapps"), 60, "the master to remove the dead app")
        seen["left_of_first"] = sorted(left_after(seen["executor_tree"], EXECUTOR_EXIT))
        seen["second_lease"] = wait_for(
            lambda: (lease := read_lease(control)) and not lease.released and lease.pid != seen["first_lease"].pid
            and lease, WAIT, "a new driver holding the lease")
        run.land("c", seed=63)
        wait_for(run.caught_up, WAIT, "the restarted driver to commit the files landed after the kill")
        [seen["second_app"]] = list(apps(run.cluster, "activeapps"))
    finally:
        stop.set()
        thread.join(timeout=POLICY.stop_grace_seconds + 60)
    assert not thread.is_alive()
    wait_for(lambda: apps(run.cluster, "activeapps") == {} and [1], 60, "the stopped driver's application to end")
    second_executors = {p.pid for pid in executor_processes(seen["second_app"])
                        for p in [psutil.Process(pid), *psutil.Process(pid).children(True)]}
    seen["after_stop"] = {"executors": left_after(second_executors, EXECUTOR_EXIT),
                          "spark_submits": spark_submits(),
                          "driver_group": group_members(supervisor.driver.pgid)}
    return {"outcome": outcome, "events": events, "seen": seen, "lease": read_lease(control),
            "events_table": Counter(table_event_ids(run.lake))}


def test_a_killed_driver_leaves_no_executor_and_is_restarted_on_the_cluster(run, supervised):
    seen = supervised["seen"]
    assert [e["kind"] for e in supervised["events"]] == ["start", "restart", "stop"], supervised["events"]
    assert supervised["events"][1]["reason"] == "the driver was killed by SIGKILL"
    assert seen["left_of_first"] == []  # the executor JVM and its Python workers
    assert apps(run.cluster, "completedapps")[seen["first_app"]]["state"] in ("FINISHED", "KILLED")
    assert seen["second_app"] != seen["first_app"]
    assert seen["second_lease"].generation > seen["first_lease"].generation


def test_the_supervised_job_stops_gracefully_and_leaves_nothing_running(run, supervised):
    stopped = supervised["events"][-1]
    assert supervised["outcome"] == {"outcome": "stopped"}
    assert stopped["outcome"].startswith("the driver stopped after its micro-batch in "), stopped
    assert stopped["exit_code"] == 0
    assert supervised["lease"].released
    after = supervised["seen"]["after_stop"]
    assert (after["executors"], after["spark_submits"], after["driver_group"]) == ([], [], [])


def test_every_landed_event_is_in_the_table_once(run, supervised):
    assert supervised["events_table"] == Counter(run.good)
    assert batch_ids(run.checkpoint / "offsets") == batch_ids(run.checkpoint / "commits")


def _rows(lake: Path, table: str, drop: tuple[str, ...] = ()) -> list[dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake / "tables" / table)).to_pyarrow_table().to_pylist()
    rows = [{k: v for k, v in row.items() if k not in drop} for row in rows]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def test_the_tables_are_exactly_those_of_local_mode(run, supervised, run_job, tmp_path):
    run_job(run.landing, tmp_path / "lake")  # local[2], the session's SparkSession

    assert _rows(run.lake, "cloudtrail_events") == _rows(tmp_path / "lake", "cloudtrail_events")
    quarantine = _rows(run.lake, "cloudtrail_quarantine", drop=("quarantined_at", "ingest_date"))
    assert quarantine == _rows(tmp_path / "lake", "cloudtrail_quarantine", drop=("quarantined_at", "ingest_date"))
    assert len(quarantine) >= 5 and len(_rows(run.lake, "cloudtrail_events")) == len(run.good)
