"""cloudtrail_etl_catchup started by its data under a real Airflow on loopback (api-server, scheduler, dag-processor,
triggerer): the registry entry chooses ``CatchupTrigger(on="data")``, so the DAG is scheduled on the Asset
``cloudtrail_etl_landing`` (its watcher lists the landing folder every 2 s in the triggerer) or its hourly cron.

In order, on one Airflow and one lake: unpausing starts the cron's run for the last hour (the safety net; an empty
folder); then an idle window gives no data-triggered run; one file landing starts a run within 30 s; a burst of 20
files gives one or two runs (the watcher fires at most once per ``coalesce_seconds``, and events that come while a
run is active are queued into the next one); no two runs ever overlap; another idle window gives nothing; every
event of the 21 files is in cloudtrail_events exactly once; and 10 files landing one a second while the continuous
driver holds the lease start no run at all (it ingests them). "An hour with no files gives no run" is the watcher's decision proven over an hour of polls in
tests/plugins/triggers/test_landing_files_trigger.py, plus the idle windows here with the scheduler and triggerer running.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers.approvals import running
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.real_airflow import RestApi, wait_for

from spark_jobs.control.checkpoint.lease import Lease
from spark_jobs.registry import JOBS
from tools.local_airflow import LocalAirflow, free_port

DAG_ID = "cloudtrail_etl_catchup"
# An idle window: five polls of the watcher (the registry's `poll_seconds`) and the seconds an asset event takes to be
# written after a poll fires it. Both what the watcher fired (its asset events, written by the triggerer as it fires)
# and the runs are read at the window's end: a fired event shows in the first within the margin, long before the
# scheduler's run would.
IDLE_SECONDS = 5 * JOBS["cloudtrail_etl"].catchup.poll_seconds + 5
FOLDER = Path("AWSLogs/123456789012/CloudTrail/us-east-1/2024/03/02")


class Stage:
    def __init__(self, root: Path) -> None:
        self.root, self.landing, self.lake, self.home = root, root / "landing", root / "lake", root / "airflow_home"
        self.landing.mkdir()
        self.expected: list[str] = []
        self.landed_at: list[float] = []  # wall-clock times (time.time()) of each landing
        env = {**os.environ,
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
               "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
               "LAKE_ROOT": str(self.lake), "CLOUDTRAIL_ETL_INPUT": str(self.landing)}
        self.airflow = LocalAirflow(self.home, free_port(29500), env, auth="simple")
        self.api = RestApi(self.airflow.url)

    def land(self, name: str, records: int = 2, expected: bool = True) -> None:
        """One CloudTrail delivery of ``records`` events, written under a temporary name and renamed (as a
        delivery lands: the watcher and the stream never see half a file); ``expected``: a run must load it."""
        ids = [f"{name}-{r}" for r in range(records)]
        document = {"Records": [{"eventVersion": "1.08", "eventID": event_id, "eventTime": f"2024-03-02T10:00:{r:02d}Z",
                                 "eventSource": "s3.amazonaws.com", "eventName": "GetObject",
                                 "awsRegion": "us-east-1"} for r, event_id in enumerate(ids)]}
        final = self.landing / FOLDER / f"123456789012_CloudTrail_us-east-1_20240302T1000Z_{name}.json.gz"
        final.parent.mkdir(parents=True, exist_ok=True)
        temp = final.with_name(final.name + ".tmp")
        temp.write_bytes(gzip.compress(json.dumps(document).encode()))
        temp.rename(final)
        if expected:
            self.expected += ids
            self.landed_at.append(time.time())

    def runs(self, run_type: str | None = None) -> list[dict]:
        return [r for r in self.api.runs(DAG_ID) if run_type is None or r["run_type"] == run_type]

    def watched_files(self) -> int:
        """The input files the landing watcher has reported: the sum of its asset events' ``new_files``."""
        events = self.api("GET", "/assets/events?limit=100")["asset_events"]
        return sum(e["extra"]["payload"]["new_files"] for e in events if (e.get("extra") or {}).get("from_trigger"))

    def every_event_in_a_run(self) -> list[dict] | None:
        """Every run, once every landed event is in the table (a run read its file: the watcher tells of a file
        only while it waits, so one the run of an earlier event read is never an event of its own), no asset event
        waits for a run (the scheduler deletes an event's queue entry as it creates the run) and no run is queued
        or running. Read in that order, so a run created between two reads cannot be missed."""
        if self.event_ids() != sorted(self.expected):
            return None
        if self.api("GET", f"/dags/{DAG_ID}/assets/queuedEvents")["total_entries"]:
            return None
        return self.finished_runs()

    def finished_runs(self) -> list[dict] | None:
        """Every run, if there is one and none is queued or running; else None."""
        runs = self.runs()
        return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None

    def settled(self) -> list[dict]:
        """Every run, once none is queued or running."""
        return wait_for("the catch-up runs to settle", self.finished_runs)

    def event_ids(self) -> list[str]:
        from deltalake import DeltaTable

        table = self.lake / "tables" / "cloudtrail_events"
        if not (table / "_delta_log").is_dir():
            return []
        return sorted(DeltaTable(str(table)).to_pyarrow_table(columns=["eventID"])["eventID"].to_pylist())


def moment(text: str | None) -> float | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    require_airflow_env()
    stage = Stage(tmp_path_factory.mktemp("catchup_on_data"))
    with running(stage.airflow, f"the dag-processor to parse {DAG_ID}", lambda: stage.api("GET", f"/dags/{DAG_ID}")):
        yield stage


@pytest.fixture(scope="module")
def story(stage):
    """Everything the tests look at, in the order it happened."""
    stage.api.set_paused(DAG_ID, False)
    cron = stage.settled()  # the cron's run of the last hour (catchup=False: only that one)
    time.sleep(IDLE_SECONDS)
    idle_before = {"watched": stage.watched_files(), "runs": stage.runs("asset_triggered")}

    stage.land("first")
    first = wait_for("a run started by the first file", lambda: stage.runs("asset_triggered"), every=0.5)
    first_runs = stage.settled()

    for i in range(20):  # a burst: 20 deliveries within about two seconds
        stage.land(f"burst-{i:02d}")
        time.sleep(0.1)
    wait_for("a run started by the burst", lambda: len(stage.runs("asset_triggered")) > len(first), every=0.5)
    # Not a fixed wait: under load the watcher may report the burst's last files after the first burst run ended.
    after_burst = wait_for("every file of the burst in the table and every run finished",
                           stage.every_event_in_a_run, every=0.5)
    watched = stage.watched_files()
    time.sleep(IDLE_SECONDS)
    idle_after = {"watched_before": watched, "watched": stage.watched_files(), "runs": stage.runs("asset_triggered")}
    events = stage.event_ids()

    # The continuous driver owns the job (a live lease of a streaming trigger): a trickle of 10 deliveries, one a
    # second, is its to ingest, and fires no event and no catch-up run.
    holder = Lease.acquire(str(stage.lake / "control" / JOBS["cloudtrail_etl"].name), "cloudtrail_etl", 120,
                           details={"trigger": "processing-time:1s"})
    try:
        holder.start_heartbeat()
        for i in range(10):
            stage.land(f"owned-{i:02d}", expected=False)
            time.sleep(1)
        time.sleep(IDLE_SECONDS)
        owned = {"watched": stage.watched_files(), "runs": stage.runs("asset_triggered")}
    finally:
        holder.release()
    return {"cron": cron, "idle_before": idle_before, "first": first, "first_runs": first_runs,
            "after_burst": after_burst, "idle_after": idle_after, "events": events, "owned": owned}


def test_unpausing_runs_the_cron_once_the_safety_net(story):
    assert [r["run_type"] for r in story["cron"]] == ["scheduled"]
    assert story["cron"][0]["state"] == "success"


def test_no_files_no_run(story):
    # an idle window after the cron's run: the watcher fired nothing, and no run came of it
    assert story["idle_before"] == {"watched": 0, "runs": []}
    # and after the burst's runs: nothing either (the cron may have run meanwhile if an hour began: not counted)
    assert story["idle_after"]["watched"] == story["idle_after"]["watched_before"]
    assert 2 <= story["idle_after"]["watched"] <= 21  # the first file, then the burst's files told while they waited
    assert [r["dag_run_id"] for r in story["idle_after"]["runs"]] == [
        r["dag_run_id"] for r in story["after_burst"] if r["run_type"] == "asset_triggered"]


def test_the_first_file_starts_a_run_within_30_s(stage, story):
    [run] = story["first"]
    landed = stage.landed_at[0]
    assert moment(run["queued_at"]) - landed <= 30, (run, landed)
    started = [r for r in story["first_runs"] if r["dag_run_id"] == run["dag_run_id"]][0]
    assert moment(started["start_date"]) - landed <= 30, (started, landed)
    assert started["state"] == "success"


def test_a_burst_of_20_files_gives_one_or_two_runs(story):
    burst = [r for r in story["after_burst"] if r["run_type"] == "asset_triggered"][1:]
    assert 1 <= len(burst) <= 2, [(r["dag_run_id"], r["queued_at"]) for r in burst]
    assert all(r["state"] == "success" for r in burst)


def test_files_landing_while_the_continuous_driver_owns_the_job_start_no_run(story):
    assert story["owned"]["watched"] == story["idle_after"]["watched"]
    assert [r["dag_run_id"] for r in story["owned"]["runs"]] == [
        r["dag_run_id"] for r in story["idle_after"]["runs"]]


def test_never_two_runs_at_once(story):
    spans = sorted((moment(r["start_date"]), moment(r["end_date"])) for r in story["after_burst"])
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), spans


def test_every_event_lands_exactly_once(stage, story):
    assert story["events"] == sorted(stage.expected)
    assert len(stage.expected) == 21 * 2
