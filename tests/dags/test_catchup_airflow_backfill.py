"""Airflow's own backfill of cloudtrail_etl_catchup under a real scheduler: each run loads its hour's files.

One Airflow (``tools.local_airflow``, the code behind ``make airflow``) runs for the module with its
own home, port and lake. The history folder holds generated CloudTrail deliveries (``sample_data``'s
records) at 22:00 and 23:00 UTC on 2026-01-05 and at 01:00 and 02:00 on 2026-01-06, in two date folders;
``airflow backfill create`` from 23:00 to 01:00 (3 hourly runs across midnight, the folder given in
``--dag-run-conf``) must load exactly the 2 deliveries inside that range, each by the run of its hour
(the midnight run, an hour with no files, ends at ``plan``; the deliveries of the hours just outside the range
are left alone). The live checkpoint is left alone: the scheduled run that unpausing
starts has no live landing folder here and fails at ``plan``, before any spark-submit. (Each run is a few
task processes: the range is kept short so the module costs seconds, not minutes, of the suite.)
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tools.sample_data import DELIVERY_TARGETS, generate_records
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.real_airflow import RestApi, free_port, wait_for

from tools.local_airflow import LocalAirflow, marked_processes

DAG_ID = "cloudtrail_etl_catchup"
# Four deliveries across midnight, none at midnight; the backfill's range holds the middle two.
DELIVERIES = [datetime(2026, 1, 5, 22, tzinfo=UTC) + timedelta(hours=h) for h in (0, 1, 3, 4)]
FIRST, LAST = DELIVERIES[1], DELIVERIES[2]  # 23:00 .. 01:00: 3 runs, the midnight one with no files
IN_RANGE = DELIVERIES[1:3]
RECORDS_PER_FILE = 4


def write_history(root: Path) -> dict[datetime, list[str]]:
    """The DELIVERIES, named and foldered as CloudTrail names them; eventIDs by delivery time."""
    account, region = DELIVERY_TARGETS[0]
    rng = random.Random(9)
    by_time: dict[datetime, list[str]] = {}
    for stamp in DELIVERIES:
        records = generate_records(rng, RECORDS_PER_FILE, stamp)
        folder = root / "AWSLogs" / account / "CloudTrail" / region / f"{stamp:%Y/%m/%d}"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{account}_CloudTrail_{region}_{stamp:%Y%m%dT%H%MZ}_{rng.getrandbits(40):010x}.json.gz"
        (folder / name).write_bytes(gzip.compress(json.dumps({"Records": records}).encode()))
        by_time[stamp] = [r["eventID"] for r in records]
    return by_time


class Setup:
    """The Airflow, its lake and the history folder (the live landing folder does not exist)."""

    def __init__(self, root: Path) -> None:
        self.root, self.lake, self.home = root, root / "lake", root / "airflow_home"
        self.landing, self.history = root / "landing", root / "history"  # the live landing folder: none
        self.by_time = write_history(self.history)
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__PARALLELISM": "6",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "LAKE_ROOT": str(self.lake),
            "CLOUDTRAIL_ETL_INPUT": str(self.landing),  # does not exist
            "CLOUDTRAIL_ETL_INPUT_ROOTS": str(root),
            # No live job runs here, and an idle-priority driver crawls on a machine busy with other work.
            "CLOUDTRAIL_ETL_BACKFILL_PRIORITY": "normal",
        }
        self.airflow = LocalAirflow(self.home, free_port(28400), self.env, auth="simple")
        self.api = RestApi(self.airflow.url)

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["airflow", *args], cwd=PROJECT_ROOT, env={**self.env, **self.airflow.component_env},
                              capture_output=True, text=True, timeout=300)

    def event_ids(self) -> list[str]:
        from deltalake import DeltaTable

        table = self.lake / "tables" / "cloudtrail_events"
        return sorted(DeltaTable(str(table)).to_pyarrow_table(columns=["eventID"])["eventID"].to_pylist())


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    """Start Airflow, create the backfill of FIRST..LAST, unpause, wait until every run has ended."""
    require_airflow_env()
    setup = Setup(tmp_path_factory.mktemp("airflow_backfill"))
    try:
        # The backfill is created before the scheduler starts: on SQLite the inserts of its one transaction
        # and a busy scheduler lock each other out ("database is locked"; a real deployment's database
        # does not). The scheduler then runs it as it would any backfill.
        for step in (["db", "migrate"], ["dags", "reserialize"]):
            done = setup.cli(*step)
            assert done.returncode == 0, f"airflow {' '.join(step)}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        started = time.monotonic()
        created = setup.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", FIRST.isoformat(),
                            "--to-date", LAST.isoformat(), "--max-active-runs", "6",
                            "--dag-run-conf", json.dumps({"input": str(setup.history)}))
        assert created.returncode == 0, created.stdout[-3000:] + created.stderr[-3000:]
        setup.airflow.start()
        wait_for(f"the dag-processor to parse {DAG_ID}", lambda: setup.api("GET", f"/dags/{DAG_ID}"))
        setup.api.set_paused(DAG_ID, False)
        [backfill] = wait_for("the backfill", lambda: setup.api("GET", f"/backfills?dag_id={DAG_ID}")["backfills"])
        wait_for("the backfill to complete", lambda: setup.api("GET", f"/backfills/{backfill['id']}")["completed_at"],
                 timeout=1500, every=5)
        took = time.monotonic() - started
        runs = setup.api.runs(DAG_ID)
        wait_for("the scheduled run to end", lambda: all(
            r["state"] in ("success", "failed") for r in setup.api.runs(DAG_ID)), timeout=300, every=5)
        runs = setup.api.runs(DAG_ID)
        states = {r["dag_run_id"]: (r["run_type"], r["state"], r["data_interval_start"], setup.api.task_states(
            DAG_ID, r["dag_run_id"])) for r in runs}
        print(f"airflow backfill of {len(runs) - 1} runs took {took:.0f} s")
        yield {"setup": setup, "runs": states, "seconds": took}
    finally:
        setup.airflow.stop(grace=20)
    assert marked_processes(str(setup.home)) == {}, "processes of the test Airflow outlived `stop`"


def test_every_backfill_run_succeeds_and_only_hours_with_files_spark_submit(backfilled):
    backfill = {start: tasks for run_type, state, start, tasks in backfilled["runs"].values() if run_type == "backfill"}
    assert len(backfill) == 3
    assert all(state == "success" for run_type, state, _, _ in backfilled["runs"].values() if run_type == "backfill")
    submitted = sorted(datetime.fromisoformat(start.replace("Z", "+00:00")) for start, tasks in backfill.items()
                       if tasks["spark_submit"] == "success")
    assert submitted == IN_RANGE
    assert {tasks["spark_submit"] for tasks in backfill.values()} == {"success", "skipped"}
    assert all(tasks["plan"] == "success" for tasks in backfill.values())


def test_the_backfill_loads_exactly_the_deliveries_of_its_range(backfilled):
    setup = backfilled["setup"]
    expected = sorted(i for stamp in IN_RANGE for i in setup.by_time[stamp])
    assert setup.event_ids() == expected
    assert len(expected) == len(IN_RANGE) * RECORDS_PER_FILE


def test_each_interval_has_its_own_checkpoint_and_the_live_one_read_nothing(backfilled):
    setup = backfilled["setup"]
    checkpoints = sorted(p.name for p in (setup.lake / "checkpoints").iterdir())
    backfills = [name for name in checkpoints if name.startswith("cloudtrail_etl@backfill-")]
    assert len(backfills) == len(IN_RANGE)
    assert sorted(name.split("-")[1] for name in backfills) == sorted(f"{stamp:%Y%m%dT%H%M%SZ}" for stamp in IN_RANGE)
    # The scheduled run of the live job: no live landing folder here, so it fails at plan, no spark-submit.
    # (A second one when the test spans the top of an hour.)
    live = [(state, tasks) for run_type, state, _, tasks in backfilled["runs"].values() if run_type == "scheduled"]
    assert live and all(run == ("failed", {"plan": "failed", "spark_submit": "upstream_failed"}) for run in live)
    assert "cloudtrail_etl" not in checkpoints
