"""OpenLineage from the Airflow task run to the Spark run to the Delta tables, under a real Airflow on loopback
(api-server, scheduler, dag-processor, triggerer; :class:`tools.local_airflow.LocalAirflow`, the code behind
``make airflow``, which configures the OpenLineage provider's file transport into the lake).

One lake, two DAG runs: ``cloudtrail_etl_catchup``'s scheduled run (unpaused after files landed) and a
``cloudtrail_etl_backfill`` run over 2024-03-01..2024-03-02 of a history folder that also holds a delivery of
2024-03-03. Then the events files hold, for each DAG run:

- the Spark run (``spark_jobs/cloudtrail_etl``: START and COMPLETE);
- as its parent the Airflow task run ``<dag>.spark_submit`` by the same run id as the provider's own events of that
  task, and as its root the DAG run;
- its input dataset (the landing, the history folder) and the two Delta tables as outputs, by the same
  namespace and name in both runs, with the rows each wrote;

and ``python -m spark_jobs lineage cloudtrail_events`` lists those runs with their DAG runs' ids. Every event, the
provider's too, validates against the pinned OpenLineage schema.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from spark_jobs.control.lineage.reading import read_events
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.approvals import running
from tests.helpers.cloudtrail import dated_delivery
from tests.helpers.openlineage_schema import problems
from tests.helpers.project import run_cli
from tests.helpers.real_airflow import RestApi, wait_for
from tools.local_airflow import LocalAirflow, free_port

CATCHUP, BACKFILL = "cloudtrail_etl_catchup", "cloudtrail_etl_backfill"
ACCOUNT = Path("AWSLogs/111122223333/CloudTrail/eu-west-1")


def records(prefix: str, day: dt.date, count: int) -> list[dict]:
    return [{"eventVersion": "1.08", "eventID": f"{prefix}-{i}", "eventTime": f"{day:%Y-%m-%d}T10:00:{i:02d}Z",
             "eventSource": "s3.amazonaws.com", "eventName": "GetObject", "awsRegion": "eu-west-1"}
            for i in range(count)]


class Stage:
    def __init__(self, root: Path) -> None:
        self.root, self.landing, self.history = root, root / "landing", root / "history"
        self.lake, self.home = root / "lake", root / "airflow_home"
        for day, count in ((dt.date(2024, 3, 2), 3), (dt.date(2024, 3, 2), 4)):
            dated_delivery(self.landing / ACCOUNT, dt.datetime.combine(day, dt.time(10, count)),
                           records(f"landing-{count}", day, count), f"L{count}")
        for day, count in ((dt.date(2024, 3, 1), 2), (dt.date(2024, 3, 2), 5), (dt.date(2024, 3, 3), 6)):
            dated_delivery(self.history / ACCOUNT, dt.datetime.combine(day, dt.time(9)),
                           records(f"history-{day}", day, count), f"H{day.day}")
        env = {**os.environ,
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
               "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
               "LAKE_ROOT": str(self.lake), "CLOUDTRAIL_ETL_INPUT": str(self.landing),
               "CLOUDTRAIL_ETL_INPUT_ROOTS": str(self.history)}
        for name in [k for k in env if k.startswith(("AIRFLOW__OPENLINEAGE__", "OPENLINEAGE_"))]:
            del env[name]  # make airflow's own settings, not the caller's
        self.airflow = LocalAirflow(self.home, free_port(29900), env, auth="simple")
        self.api = RestApi(self.airflow.url)

    def settled(self, dag_id: str, count: int = 1) -> list[dict]:
        return wait_for(f"{count} finished run(s) of {dag_id}",
                        lambda: (runs := self.api.runs(dag_id)) and len(runs) >= count
                        and all(r["state"] in ("success", "failed") for r in runs) and runs)


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    require_airflow_env()
    stage = Stage(tmp_path_factory.mktemp("lineage_runs"))
    with running(stage.airflow, f"the dag-processor to parse {BACKFILL}", lambda: stage.api("GET", f"/dags/{BACKFILL}")):
        stage.api.set_paused(CATCHUP, False)  # the cron's run of the last hour catches up what landed
        catchup = stage.settled(CATCHUP)
        stage.api.set_paused(CATCHUP, True)
        stage.api.set_paused(BACKFILL, False)
        stage.api.trigger(BACKFILL, {"source": str(stage.history), "date_from": "2024-03-01", "date_to": "2024-03-02",
                                     "max_files_per_trigger": None, "dry_run": False})
        backfill = stage.settled(BACKFILL)
        page = {path: fetch(stage, path) for path in ("/streaming-health/api/lineage/cloudtrail_events",
                             "/streaming-health/lineage/cloudtrail_events", "/streaming-health/job/cloudtrail_etl")}
    listed = run_cli("lineage", "cloudtrail_events", "--lake", str(stage.lake), "--json")
    return {"stage": stage, "catchup": catchup, "backfill": backfill, "listed": listed, "page": page,
            "spark": sorted(read_events(str(stage.lake / "_lineage/spark")), key=lambda e: e["eventTime"]),
            "airflow": list(read_events(str(stage.lake / "_lineage/airflow")))}


def fetch(stage, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(stage.airflow.url + path, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def spark_runs(story) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for event in story["spark"]:
        runs.setdefault(event["run"]["runId"], []).append(event)
    return {run_id: events for run_id, events in runs.items() if events[-1]["outputs"][0]["outputFacets"][
        "outputStatistics"]["rowCount"]}  # the runs that wrote rows (a run with nothing new writes none)


def test_both_dag_runs_succeeded(story):
    assert [r["state"] for r in story["catchup"]] == ["success"]
    assert [r["state"] for r in story["backfill"]] == ["success"]


def test_each_dag_run_has_its_spark_run_with_the_airflow_task_run_as_parent(story):
    runs = spark_runs(story)
    by_parent = {events[-1]["run"]["facets"]["parent"]["job"]["name"]: events for events in runs.values()}
    assert sorted(by_parent) == [f"{BACKFILL}.spark_submit", f"{CATCHUP}.spark_submit"]
    airflow_runs = {(e["job"]["name"], e["run"]["runId"]) for e in story["airflow"]}
    for dag_id, dag_runs in ((CATCHUP, story["catchup"]), (BACKFILL, story["backfill"])):
        events = by_parent[f"{dag_id}.spark_submit"]
        assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
        parent = events[-1]["run"]["facets"]["parent"]
        # the provider's own events of the task run and of the DAG run carry the same ids
        assert (f"{dag_id}.spark_submit", parent["run"]["runId"]) in airflow_runs
        assert (dag_id, parent["root"]["run"]["runId"]) in airflow_runs
        assert parent["job"]["namespace"] == parent["root"]["job"]["namespace"] == "airflow"
        task_events = [e for e in story["airflow"] if e["run"]["runId"] == parent["run"]["runId"]]
        assert {e["run"]["facets"]["airflow"]["dagRun"]["run_id"] for e in task_events if "airflow" in e["run"][
            "facets"]} == {dag_runs[0]["dag_run_id"]}


def test_inputs_and_outputs_keep_their_names_across_runs(story):
    stage = story["stage"]
    runs = {events[-1]["run"]["facets"]["parent"]["job"]["name"].split(".")[0]: events[-1]
            for events in spark_runs(story).values()}
    assert [(i["namespace"], i["name"]) for i in runs[CATCHUP]["inputs"]] == [("file", str(stage.landing))]
    assert [(i["namespace"], i["name"]) for i in runs[BACKFILL]["inputs"]] == [("file", str(stage.history))]
    outputs = {dag: [(o["namespace"], o["name"]) for o in event["outputs"]] for dag, event in runs.items()}
    assert outputs[CATCHUP] == outputs[BACKFILL] == [("file", str(stage.lake / "tables/cloudtrail_events")),
                                                     ("file", str(stage.lake / "tables/cloudtrail_quarantine"))]
    assert runs[CATCHUP]["job"]["name"] == runs[BACKFILL]["job"]["name"] == "cloudtrail_etl"
    rows = {dag: event["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] for dag, event in runs.items()}
    assert rows == {CATCHUP: 3 + 4, BACKFILL: 2 + 5}  # the 2024-03-03 delivery is outside the backfill's range


def test_lineage_lists_the_runs_that_wrote_the_table_with_their_dag_runs(story):
    done = story["listed"]
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["dag_id"], r["dag_run_id"], r["parent_job"], r["rows"], r["state"]) for r in listed] == [
        (CATCHUP, story["catchup"][0]["dag_run_id"], f"{CATCHUP}.spark_submit", 7, "COMPLETE"),
        (BACKFILL, story["backfill"][0]["dag_run_id"], f"{BACKFILL}.spark_submit", 7, "COMPLETE")]
    assert {r["run_id"] for r in listed} == set(spark_runs(story))


def test_every_event_validates_against_the_pinned_openlineage_schema(story):
    assert story["spark"] and story["airflow"]
    assert [p for e in story["spark"] + story["airflow"] for p in problems(e)] == []


def test_the_health_page_links_each_table_to_the_same_runs(story):
    listed = [json.loads(line) for line in story["listed"].stdout.splitlines()]
    status, body = story["page"]["/streaming-health/api/lineage/cloudtrail_events"]
    assert (status, json.loads(body)) == (200, listed)
    status, html = story["page"]["/streaming-health/lineage/cloudtrail_events"]
    assert status == 200 and all(f'data-run="{r["run_id"]}"' in html and r["dag_run_id"] in html for r in listed)
    status, job_page = story["page"]["/streaming-health/job/cloudtrail_etl"]
    assert status == 200 and '<a href="/streaming-health/lineage/cloudtrail_events">cloudtrail_events</a>' in job_page
