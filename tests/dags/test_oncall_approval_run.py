"""Four eyes on streaming_oncall under a real Airflow on loopback (api-server, scheduler, dag-processor, triggerer),
with named users of the simple auth manager and their real tokens, the trigger form and the required action in real
headless Chromium, and the timeline on the health page.

alice (role USER) asks for ``rollback_table`` three times:

1. in the UI's trigger form (Chromium): it has no default job or action and no ``null``, no "unpause" box, and its
   JSON (Advanced Options) fills it without "This field is required"; then she presses **Approve** on her own
   request: Airflow refuses it ("not a respondent": the request is assigned to the other users who may answer), the
   page shows the refusal and why, and the request stays open; bob rejects it: nothing runs (the task is skipped);
2. through the REST API, as the form does: nobody answers: it expires (``$STREAMING_ONCALL_APPROVAL_EXPIRY``
   shortens the registry's 4 h for the test; the scheduler's sweep runs every 2 s) and runs nothing;
3. bob approves it: the rollback is spark-submitted (real Spark: ``lake restore``) and the table is back at the
   earlier version.

vic (role VIEWER) may not answer at all (403). Each request is one ``ops_audit`` row with both names (the expired one
has none to name but the requester). The lake's ``cloudtrail_events`` is written with delta-rs (two commits: the first
run's rows, then a bad deploy's junk rows), so no SparkSession starts in this process.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pytest

from spark_jobs.control.monitoring.conditions import Condition
from spark_jobs.control.monitoring.incidents import IncidentStore
from spark_jobs.control.oncall.audit import read_rows
from spark_jobs.control.supervision.state import append_event
from spark_jobs.model.lake import Lake
from tests.helpers.approvals import UserApi, pending, running, user_settings, wait_parked
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.real_airflow import wait_for

from tools.local_airflow import LocalAirflow, free_port

DAG_ID, TASK = "streaming_oncall", "act"
JOB, TABLE = "cloudtrail_etl", "cloudtrail_events"
EXPIRY = 45  # seconds a request waits in this Airflow
ROWS = [("e1", "2024-03-01"), ("e2", "2024-03-01"), ("e3", "2024-03-02")]
JUNK = [("junk-1", "2024-03-02")]
CONF = {"job": JOB, "action": "rollback_table", "table": TABLE, "table_version": 0}


def write_table(lake: Lake) -> None:
    """``cloudtrail_events`` version 0 (the rows) and version 1 (a bad deploy's junk row), one delta-rs commit each."""
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = pa.schema([("eventID", pa.string()), ("date", pa.date32())])
    for rows in (ROWS, JUNK):
        table = pa.Table.from_pylist([{"eventID": i, "date": dt.date.fromisoformat(d)} for i, d in rows], schema=schema)
        write_deltalake(str(lake.table_path(TABLE)), table, mode="append", partition_by=["date"])


def events(lake: Lake) -> list[tuple[str, str]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake.table_path(TABLE))).to_pyarrow_table().to_pylist()
    return sorted((r["eventID"], r["date"].isoformat()) for r in rows)


class Stage:
    """The Airflow, its users and the lake."""

    def __init__(self, root) -> None:
        self.root, self.lake, self.home = root, Lake(root / "lake"), root / "airflow_home"
        (root / "landing").mkdir()
        env = {**os.environ, **user_settings(self.home),
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
               "LAKE_ROOT": str(self.lake.root), "CLOUDTRAIL_ETL_INPUT": str(root / "landing"),
               "STREAMING_ONCALL_APPROVAL_EXPIRY": str(EXPIRY)}
        self.airflow = LocalAirflow(self.home, free_port(29100), env)
        self.runs: dict[str, dict] = {}

    def users(self) -> None:
        self.alice, self.bob, self.vic = (UserApi(self.airflow.url, name) for name in ("alice", "bob", "vic"))
        self.admin = UserApi(self.airflow.url, "admin")

    def request(self, reason: str) -> tuple[str, dict]:
        """alice asks for the rollback; the run id and its required action once the task waits for it."""
        return self.awaiting(self.alice.trigger(DAG_ID, {**CONF, "reason": reason}))

    def awaiting(self, run_id: str) -> tuple[str, dict]:
        """The run id and its required action once the task waits for it."""
        found = wait_for(f"the required action of {run_id}", lambda: [
            d for d in pending(self.bob, DAG_ID) if d["task_instance"]["dag_run_id"] == run_id], every=0.5)
        wait_parked(self.airflow, DAG_ID, TASK, run_id)
        return run_id, found[0]

    def ended(self, run_id: str) -> dict:
        return wait_for(f"{run_id} to end", lambda: (r := self.admin("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}"))[
            "state"] in ("success", "failed") and r)

    def task_state(self, run_id: str) -> str:
        return self.admin("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}")["state"]

    def audit(self, run_id: str) -> dict:
        rows = [r for r in read_rows(self.lake) if r["run_id"] == run_id]
        if len(rows) != 1:
            log = self.admin("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}/logs/1?full_content=true")
            pytest.fail(f"{len(rows)} ops_audit rows for {run_id}; the task's log:\n{json.dumps(log)[-6000:]}")
        return rows[0]


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    require_airflow_env()
    stage = Stage(tmp_path_factory.mktemp("oncall_approval"))
    write_table(stage.lake)
    with running(stage.airflow, f"the DAG {DAG_ID} to be parsed",
                 lambda: stage.users() or stage.admin("GET", f"/dags/{DAG_ID}")):
        stage.admin("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
        yield stage


@pytest.fixture(scope="module")
def browser(stage):
    """Debian's headless Chromium, driven by Playwright, for the module."""
    from tests.helpers.chromium import headless_browser

    with headless_browser() as browser:
        yield browser


def logged_in(stage, browser, user: str, path: str):
    """A new page of ``browser`` logged in as ``user`` at ``path`` (the login form first)."""
    page = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(stage.airflow.url + path)
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(f"{user}-secret")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{path}**", timeout=60_000)
    return page


@pytest.fixture(scope="module")
def form(stage, browser):
    """alice opens the trigger form of streaming_oncall, reads it, fills it through its JSON and triggers."""
    page = logged_in(stage, browser, "alice", f"/dags/{DAG_ID}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run Parameters").wait_for(timeout=60_000)
    page.screenshot(path=str(stage.root / "form.png"), full_page=True)
    opened = dialog.inner_text()
    dialog.get_by_text("Advanced Options").click()
    dialog.locator(".monaco-editor .view-lines").last.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(json.dumps({**CONF, "reason": "sent from the form's JSON"}))
    dialog.get_by_text("Run Parameters").click()  # out of the editor: the form takes the JSON
    page.screenshot(path=str(stage.root / "form-json.png"), full_page=True)
    filled = dialog.inner_text()
    enabled = dialog.get_by_role("button", name="Trigger").is_enabled()
    dialog.get_by_role("button", name="Trigger").click()
    run = wait_for("alice's run from the form", lambda: [r for r in stage.admin.runs(DAG_ID)
                                                         if r["conf"].get("reason") == "sent from the form's JSON"])
    return {"opened": opened, "filled": filled, "enabled": enabled, "run": run[0], "page": page, "browser": browser}


@pytest.fixture(scope="module")
def self_approved(stage, form):
    """alice presses Approve on her own request on its Required Actions page; then through the REST API."""
    run_id, detail = stage.awaiting(form["run"]["dag_run_id"])
    page = form["page"]
    page.goto(f"{stage.airflow.url}/dags/{DAG_ID}/runs/{run_id}/tasks/{TASK}/required_actions")
    page.get_by_role("button", name="Approve").wait_for(timeout=60_000)
    page.screenshot(path=str(stage.root / "required-action.png"), full_page=True)
    page.get_by_role("button", name="Approve").click()
    page.get_by_text("Access Denied").first.wait_for(timeout=60_000)  # the UI's words for Airflow's 403
    page.screenshot(path=str(stage.root / "self-approval.png"), full_page=True)
    shown = page.locator("body").inner_text()
    listed = logged_in(stage, form["browser"], "bob", "/required_actions")
    listed.get_by_text(detail["subject"]).first.wait_for(timeout=60_000)
    listed.screenshot(path=str(stage.root / "required-actions.png"), full_page=True)
    in_list = listed.locator("body").inner_text()
    # A viewer may not answer; the requester may not either (the request is assigned to the others).
    assert stage.vic.answer(DAG_ID, run_id, TASK, "Approve")[0] == 403
    status, answered = stage.alice.answer(DAG_ID, run_id, TASK, "Approve")
    still = [d for d in pending(stage.bob, DAG_ID) if d["task_instance"]["dag_run_id"] == run_id]
    return {"run_id": run_id, "detail": detail, "shown": shown, "api": (status, answered), "still": still,
            "in_list": in_list, "events": events(stage.lake)}


@pytest.fixture(scope="module")
def rejected(stage, self_approved):
    run_id = self_approved["run_id"]
    assert stage.bob.answer(DAG_ID, run_id, TASK, "Reject")[0] == 200
    return {"run": stage.ended(run_id), "run_id": run_id, "events": events(stage.lake)}


@pytest.fixture(scope="module")
def expired(stage, rejected):
    asked = time.monotonic()
    run_id, _ = stage.request("nobody answers this one")
    run = stage.ended(run_id)
    return {"run": run, "run_id": run_id, "waited": time.monotonic() - asked, "events": events(stage.lake)}


@pytest.fixture(scope="module")
def approved(stage, expired):
    run_id, _ = stage.request("a bad deploy wrote version 1")
    status, answered = stage.bob.answer(DAG_ID, run_id, TASK, "Approve")
    assert status == 200 and answered["responded_by"]["name"] == "bob"
    assert stage.bob.answer(DAG_ID, run_id, TASK, "Reject")[0] == 409  # answered once, for good
    return {"run": stage.ended(run_id), "run_id": run_id, "events": events(stage.lake)}


def test_the_form_has_no_default_job_no_null_and_its_json_fills_it(form):
    opened = form["opened"].splitlines()
    assert opened[opened.index("Job") + 1] == "(choose)" and opened[opened.index("Action") + 1] == "(choose)"
    assert opened[opened.index("Table") + 1] == "(none: rollback_table only)"
    assert "null" not in opened and "None" not in opened
    assert not any("Unpause" in line or "unpause" in line for line in opened)  # unpaused at creation: no box to miss
    filled = form["filled"].splitlines()
    assert filled[filled.index("Job") + 1] == JOB and filled[filled.index("Table") + 1] == TABLE
    assert "This field is required" not in form["filled"] and form["enabled"]
    run = form["run"]
    assert (run["conf"], run["triggering_user_name"]) == ({**CONF, "reason": "sent from the form's JSON"}, "alice")


def test_the_approver_reads_the_dry_runs_plan_and_who_may_approve(self_approved):
    detail = self_approved["detail"]
    assert detail["subject"] == f"Approve rollback_table of {JOB}, asked by alice? (four eyes: not alice)"
    assert detail["options"] == ["Approve", "Reject"]
    assert [user["name"] for user in detail["assigned_users"]] == ["admin", "bob"]  # not alice, vic nor the service
    body = detail["body"]
    assert "**Requested by** alice" in body and "**Reason**: sent from the form's JSON" in body
    assert "**May approve**: admin, bob (not alice, who asked)" in body
    assert f"spark-submit: python -m spark_jobs lake restore --table {TABLE} --to-version 0 --yes" in body
    assert "(then nothing runs)" in body


def test_the_requesters_own_approval_is_refused_on_the_page_and_the_request_stays_open(stage, self_approved):
    shown = self_approved["shown"]
    # Airflow refuses her press (the UI's toast for its 403), under the request that says why and who may approve.
    assert "Access Denied" in shown and "You do not have permission to perform this action." in shown
    assert "alice asked for it and cannot approve it: refused, the requester cannot approve their own request" in shown
    assert "May approve: admin, bob (not alice, who asked)" in shown
    status, answered = self_approved["api"]
    assert status == 403 and "User=alice (id=alice) is not a respondent for the task." in answered
    assert len(self_approved["still"]) == 1  # still waiting for another user
    # Browse > Required Actions: still "Approval Required", never an "Approval Received" by the requester.
    listed = self_approved["in_list"]
    assert "Approval Required" in listed and "Approval Received" not in listed
    assert "(four eyes: not alice)" in listed
    assert self_approved["events"] == sorted(ROWS + JUNK)  # nothing rolled back


def test_a_rejected_request_runs_nothing(stage, rejected):
    assert rejected["run"]["state"] == "success" and stage.task_state(rejected["run_id"]) == "skipped"
    assert rejected["events"] == sorted(ROWS + JUNK)
    row = stage.audit(rejected["run_id"])
    assert (row["outcome"], row["decision"], row["triggered_by"], row["decided_by"]) == (
        "rejected", "rejected", "alice", "bob")
    assert row["decided_at"] >= row["time"] and row["versions_after"] == {TABLE: 1}


def test_an_expired_request_runs_nothing(stage, expired):
    assert expired["run"]["state"] == "failed" and stage.task_state(expired["run_id"]) == "failed"
    assert expired["waited"] >= EXPIRY  # it waited out its time (counted from when the task asked)
    assert expired["events"] == sorted(ROWS + JUNK)
    row = stage.audit(expired["run_id"])
    assert (row["outcome"], row["decision"], row["triggered_by"], row["decided_by"]) == (
        "expired", "expired", "alice", None)
    assert row["expires_at"] - row["time"] == dt.timedelta(seconds=EXPIRY)
    assert row["decided_at"] >= row["expires_at"]


def test_a_second_users_approval_runs_it(stage, approved):
    assert approved["run"]["state"] == "success", approved
    assert approved["events"] == sorted(ROWS)  # version 0 is back
    row = stage.audit(approved["run_id"])
    assert (row["outcome"], row["decision"], row["triggered_by"], row["decided_by"]) == (
        "succeeded", "approved", "alice", "bob")
    assert row["versions_before"] == {TABLE: 1} and row["versions_after"] == {TABLE: 2}
    assert row["time"] <= row["decided_at"] < row["expires_at"] and row["decided_at"] <= row["finished"]


def test_every_request_is_one_audit_row_with_its_names(stage, approved):
    rows = [r for r in read_rows(stage.lake) if r["action"] == "rollback_table"]
    assert [(r["triggered_by"], r["decision"], r["decided_by"], r["outcome"]) for r in rows] == [
        ("alice", "rejected", "bob", "rejected"), ("alice", "expired", None, "expired"),
        ("alice", "approved", "bob", "succeeded")]


def test_the_health_page_timeline_lists_a_restart_an_incident_and_the_approved_action_in_order(stage, approved,
                                                                                                browser):
    """A restart and an incident planted in the job's control folder before the approved action; the page, in real
    headless Chromium logged in as bob, lists them in that order with the action's requester and approver."""
    action = stage.audit(approved["run_id"])
    control = str(stage.lake.control_path(JOB))
    append_event(control, {"time": (action["time"] - dt.timedelta(minutes=2)).isoformat(), "job": JOB,
                           "kind": "restart", "reason": "driver exited with code 137", "outcome": "restarting in 1 s",
                           "restarts_in_window": 1, "max_restarts": 5})
    IncidentStore(control).update(JOB, [Condition("stalled", "error", "no commit for 20 min while 3 files wait",
                                                  "restart it")], now=action["time"] - dt.timedelta(minutes=1))
    page = logged_in(stage, browser, "bob", "/plugin/streaming-health")
    page.goto(f"{stage.airflow.url}/streaming-health/job/{JOB}")
    items = page.locator(f"section[data-job='{JOB}'] ol.timeline li")
    items.first.wait_for(timeout=60_000)
    page.screenshot(path=str(stage.root / "timeline.png"), full_page=True)
    shown = [(items.nth(i).get_attribute("data-kind"), items.nth(i).get_attribute("data-requested-by"),
              items.nth(i).get_attribute("data-decided-by"), items.nth(i).get_attribute("data-outcome"),
              items.nth(i).inner_text()) for i in range(items.count())]
    kinds = [(kind, requested, decided, outcome) for kind, requested, decided, outcome, _ in shown]
    restart = kinds.index(("restart", "", "", "restarting in 1 s"))
    incident = kinds.index(("incident", "", "", "error"))
    action_at = kinds.index(("oncall", "alice", "bob", "succeeded"))
    assert restart < incident < action_at
    assert "asked by alice, approved by bob" in shown[action_at][4]
    # The other requests are on it too, in the order they were asked.
    assert [k[3] for k in kinds if k[0] == "oncall"] == ["rejected", "expired", "succeeded"]
