"""The backfill form refuses before a run exists, in real headless Chromium against a real Airflow on loopback
(api-server, scheduler, dag-processor; :class:`tools.local_airflow.LocalAirflow`, the code behind ``make airflow``).

The job's input roots are one folder of the test (``$CLOUDTRAIL_ETL_INPUT_ROOTS``), so the form's ``source``
pattern is built from it when the dag-processor parses ``dags/backfill.py``. In the trigger form of
``cloudtrail_etl_backfill`` (filled through its JSON, Advanced Options):

1. a source outside the roots: Airflow refuses the request in the dialog, naming the field, and no run exists;
2. a source under the roots with a backwards date range (a schema cannot compare two fields): the run is created
   and ends **refused**: ``check_request`` is skipped with one log line giving the reason, nothing else runs, the
   run succeeds (no failed run), and the job's timeline says ``backfill refused: date_to: ...``.

No Spark starts: nothing gets past ``check_request``. Screenshots are kept under the test's tmp dir.
"""

from __future__ import annotations

import json
import os

import pytest

from spark_jobs.control.monitoring.runs import read_runs
from spark_jobs.control.monitoring.timeline import job_timeline
from spark_jobs.model.lake import Lake
from spark_jobs.registry import JOBS
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.approvals import running
from tests.helpers.real_airflow import RestApi, wait_for
from tools.local_airflow import LocalAirflow, free_port

DAG_ID = "cloudtrail_etl_backfill"
JOB = JOBS["cloudtrail_etl"]


class Stage:
    def __init__(self, root) -> None:
        self.root, self.home, self.lake = root, root / "airflow_home", Lake(root / "lake")
        self.history = root / "history"
        (self.history / "2024").mkdir(parents=True)
        env = {**os.environ,
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
               "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
               "LAKE_ROOT": str(self.lake.root), "CLOUDTRAIL_ETL_INPUT": str(root / "landing"),
               "CLOUDTRAIL_ETL_INPUT_ROOTS": str(self.history)}
        self.airflow = LocalAirflow(self.home, free_port(29700), env, auth="simple",
                                    components=("api-server", "scheduler", "dag-processor"))
        self.api = RestApi(self.airflow.url)

    def runs(self) -> list[dict]:
        return self.api.runs(DAG_ID)


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    require_airflow_env()
    stage = Stage(tmp_path_factory.mktemp("backfill_form"))
    with running(stage.airflow, f"the dag-processor to parse {DAG_ID}", lambda: stage.api("GET", f"/dags/{DAG_ID}")):
        stage.api.set_paused(DAG_ID, False)
        yield stage


@pytest.fixture(scope="module")
def page(stage):
    from tests.helpers.chromium import headless_browser

    with headless_browser() as browser:
        yield browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()


def trigger(stage, page, conf: dict, shot: str):
    """Open the trigger form, fill it through its JSON, press Trigger; the dialog (still open after a refusal)."""
    page.goto(f"{stage.airflow.url}/dags/{DAG_ID}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run Parameters").wait_for(timeout=60_000)
    dialog.get_by_text("Advanced Options").click()
    dialog.locator(".monaco-editor .view-lines").last.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(json.dumps(conf))
    dialog.get_by_text("Run Parameters").click()  # out of the editor: the form takes the JSON
    dialog.get_by_role("button", name="Trigger").click()
    page.wait_for_timeout(1500)
    page.screenshot(path=str(stage.root / f"{shot}.png"), full_page=True)
    return dialog


@pytest.fixture(scope="module")
def outside(stage, page):
    """A source outside the input roots: refused in the dialog."""
    dialog = trigger(stage, page, {"source": "/etc", "date_from": None, "date_to": None,
                                   "max_files_per_trigger": None, "dry_run": True}, "outside-the-roots")
    dialog.get_by_text("Invalid input for param source").first.wait_for(timeout=60_000)
    return {"shown": dialog.inner_text(), "runs": stage.runs()}


@pytest.fixture(scope="module")
def backwards(stage, page, outside):
    """A folder under the roots, From after To: a run that ends refused."""
    trigger(stage, page, {"source": str(stage.history), "date_from": "2024-03-05", "date_to": "2024-03-01",
                          "max_files_per_trigger": None, "dry_run": False}, "backwards-range")
    [run] = wait_for("the run of the backwards range", lambda: [r for r in stage.runs() if r["conf"].get("date_from")])
    ended = wait_for("it to end", lambda: (r := stage.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}"))[
        "state"] in ("success", "failed") and r)
    tasks = stage.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]
    log = stage.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/check_request/logs/1"
                           "?full_content=true")
    page.goto(f"{stage.airflow.url}/dags/{DAG_ID}/runs/{run['dag_run_id']}/tasks/check_request")
    page.get_by_text("backfill refused, nothing was run").first.wait_for(timeout=180_000)  # the log, under load
    page.screenshot(path=str(stage.root / "refused-run-log.png"), full_page=True)
    return {"run": ended, "tasks": {t["task_id"]: t["state"] for t in tasks}, "log": json.dumps(log),
            "shown": page.locator("body").inner_text(), "runs": stage.runs()}


def test_a_source_outside_the_input_roots_is_refused_on_the_form_and_creates_no_run(stage, outside):
    assert "Invalid input for param source: '/etc' does not match" in outside["shown"]
    assert str(stage.history) in outside["shown"]  # the pattern names the root
    assert outside["runs"] == []


def test_a_backwards_date_range_ends_as_a_refused_run_not_a_failed_one(stage, backwards):
    assert backwards["run"]["state"] == "success"
    assert backwards["tasks"] == {"check_request": "skipped", "unless_dry_run": "skipped", "spark_submit": "skipped"}
    assert [r["state"] for r in backwards["runs"]] == ["success"]  # the only run: no failed one
    reason = "date_to: 2024-03-01 is before date_from 2024-03-05: the range runs backwards"
    assert f"backfill refused, nothing was run: {reason}" in backwards["log"]
    assert "Traceback" not in backwards["log"]
    assert f"backfill refused, nothing was run: {reason}" in backwards["shown"]  # the task's log page, in Chromium
    [record] = read_runs(str(stage.lake.control_path(JOB.name)))
    assert (record["kind"], record["outcome"], record["reason"]) == ("backfill", "refused", reason)
    [entry] = job_timeline(JOB, stage.lake)
    assert (entry.kind, entry.outcome) == ("backfill", "refused")
    assert entry.summary.startswith(f"backfill refused: {reason} (run {backwards['run']['dag_run_id']})")
