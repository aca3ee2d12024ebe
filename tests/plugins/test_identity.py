"""Who is who under the FAB auth manager, the default of ``make airflow``: real users and roles, four eyes on real
identities, every route of the health plugin asking the auth manager, and no password anywhere it should not be.

One real Airflow for the module (api-server, scheduler, dag-processor, triggerer: :class:`tools.local_airflow.LocalAirflow`
with FAB, the code behind ``make airflow``): its set-up syncs this product's roles (:mod:`streaming.roles`) and creates
the admin, the service user of ``airflow_api`` and the people, each with a random password for this run:

- alice and oscar, operators (they may trigger ``streaming_oncall``; neither may approve);
- bob, the approver (he may approve, and trigger nothing);
- vic, a viewer (the health page and the runs, nothing else);
- carol, a teammate added with ``airflow users create`` while Airflow runs.

alice asks for ``reset_checkpoint`` of a planted checkpoint: on the approvals page (real headless Chromium through
FAB's own login page) her Approve is refused and the page says why; oscar's, the service identity's and hers again
through the REST API are refused too, each a 403 and an ``ops_audit`` row, and the request stays open; bob approves
it on the page and the checkpoint is moved to its backup. A second request waits out its expiry: bob's approval after
it is refused and audited. The expiry is shortened for the test (``$STREAMING_ONCALL_APPROVAL_EXPIRY``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import psutil
import pytest

from spark_jobs.control.oncall.audit import read_rows
from spark_jobs.model.lake import Lake
from streaming import roles
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.approvals import UserApi, pending, running, wait_parked
from tests.helpers.real_airflow import AirflowApiError, wait_for
from tools.local_airflow import SERVICE_USER, LocalAirflow, free_port

DAG_ID, TASK, JOB = roles.ONCALL_DAG, "act", "cloudtrail_etl"
EXPIRY = 90  # seconds a request waits in this Airflow
PEOPLE = {"alice": roles.OPERATOR, "oscar": roles.OPERATOR, "bob": roles.APPROVER, "vic": roles.VIEWER}
TEAMMATE = ("carol", roles.VIEWER)
PASSWORDS = {name: secrets.token_urlsafe(12) for name in [*PEOPLE, TEAMMATE[0]]}
PREFIX = "/streaming-health"


class Team:
    """The Airflow, its people and the lake."""

    def __init__(self, root) -> None:
        self.root, self.lake, self.home = root, Lake(root / "lake"), root / "airflow_home"
        (root / "landing").mkdir()
        env = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
               "LAKE_ROOT": str(self.lake.root), "CLOUDTRAIL_ETL_INPUT": str(root / "landing"),
               "STREAMING_ONCALL_APPROVAL_EXPIRY": str(EXPIRY)}
        self.airflow = LocalAirflow(self.home, free_port(29700), env, auth="fab", fab_users=[
            {"username": name, "role": role, "password": PASSWORDS[name]} for name, role in PEOPLE.items()])
        self.pages: dict[str, str] = {}

    def people(self) -> None:
        self.api = {name: UserApi(self.airflow.url, name, PASSWORDS[name]) for name in PEOPLE}
        self.admin = UserApi(self.airflow.url, "admin", self.airflow.password("admin"))
        self.service = UserApi(self.airflow.url, SERVICE_USER, self.airflow.password(SERVICE_USER))

    def plant_checkpoint(self) -> None:
        checkpoint = self.lake.checkpoint_path(JOB)
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / "metadata").write_text(json.dumps({"id": "8f9a2c4e-0000-4000-8000-000000000001"}) + "\n")

    def request_reset(self, reason: str) -> str:
        """alice asks for reset_checkpoint; the run id once its task waits for an answer."""
        run_id = self.api["alice"].trigger(DAG_ID, {"job": JOB, "action": "reset_checkpoint", "reason": reason})
        wait_for(f"the required action of {run_id}", lambda: [
            d for d in pending(self.api["bob"], DAG_ID) if d["task_instance"]["dag_run_id"] == run_id], every=0.5)
        wait_parked(self.airflow, DAG_ID, TASK, run_id)
        return run_id

    def ended(self, run_id: str) -> dict:
        return wait_for(f"{run_id} to end", lambda: (r := self.admin("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}"))[
            "state"] in ("success", "failed") and r)

    def rows(self, run_id: str) -> list[tuple]:
        """``run_id``'s ops_audit rows in the order they were written."""
        rows = sorted((r for r in read_rows(self.lake) if r["run_id"] == run_id), key=lambda r: r["finished"])
        return [(r["outcome"], r["decision"], r["triggered_by"], r["decided_by"]) for r in rows]


def call(team: Team, method: str, path: str, token: str | None = None, body: dict | None = None,
         form: dict | None = None) -> tuple[int, str]:
    """(status, body) of one request to the API server, without the project's client (a raw one, as curl)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        with urllib.request.urlopen(urllib.request.Request(team.airflow.url + path, data=data, headers=headers,
                                                           method=method), timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    require_airflow_env()
    team = Team(tmp_path_factory.mktemp("identity"))
    team.plant_checkpoint()
    with running(team.airflow, f"the DAG {DAG_ID} to be parsed",
                 lambda: team.people() or team.admin("GET", f"/dags/{DAG_ID}")):
        team.admin("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
        yield team


@pytest.fixture(scope="module")
def browser(team):
    from tests.helpers.chromium import headless_browser

    with headless_browser() as browser:
        yield browser


def logged_in(team: Team, browser, user: str):
    """A new page of ``browser``, logged in as ``user`` through FAB's own login page (the UI sends a stranger
    there)."""
    page = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(team.airflow.url + "/")
    page.locator("input[name=username]").wait_for(timeout=60_000)
    team.pages[f"login-{user}"] = page.content()
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(PASSWORDS[user])
    page.locator("input[type=submit]").click()
    page.wait_for_url(lambda url: "/login" not in url, timeout=60_000)
    return page


def press(team: Team, page, run_id: str, choice: str, shot: str) -> str:
    """On the approvals page, press ``choice`` on ``run_id``'s request; the page's text after it."""
    page.goto(f"{team.airflow.url}{PREFIX}/oncall")
    request = page.locator(f"section.request[data-run-id='{run_id}']")
    request.wait_for(timeout=60_000)
    team.pages[f"{shot}-before"] = page.content()
    request.get_by_role("button", name=choice).click()
    page.locator("p.outcome").wait_for(timeout=120_000)
    page.screenshot(path=str(team.root / f"{shot}.png"), full_page=True)
    team.pages[shot] = page.content()
    return page.locator("p.outcome").inner_text()


@pytest.fixture(scope="module")
def reset(team, browser):
    """alice's reset_checkpoint: refused on the page for her, refused by REST for oscar, the service and her, each
    also straight at Airflow's own route; then approved by bob on the page."""
    run_id = team.request_reset("the checkpoint of a bad deploy")
    alice = logged_in(team, browser, "alice")
    said_to_alice = press(team, alice, run_id, "Approve", "alice-approves-her-own")
    decide = f"{PREFIX}/api/oncall/{run_id}/decide"
    rest = {name: call(team, "POST", decide, api.token, {"choice": "Approve"})
            for name, api in [("oscar", team.api["oscar"]), ("service", team.service), ("alice", team.api["alice"])]}
    hitl = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}/-1/hitlDetails"
    straight = {name: api.status("PATCH", hitl, {"chosen_options": ["Approve"]})[0]
                for name, api in [("alice", team.api["alice"]), ("oscar", team.api["oscar"]),
                                  ("service", team.service), ("vic", team.api["vic"])]}
    still_open = [d for d in pending(team.api["bob"], DAG_ID) if d["task_instance"]["dag_run_id"] == run_id]
    kept = team.lake.checkpoint_path(JOB).is_dir()
    bob = logged_in(team, browser, "bob")
    said_to_bob = press(team, bob, run_id, "Approve", "bob-approves")
    return {"run_id": run_id, "alice": said_to_alice, "rest": rest, "straight": straight, "still_open": still_open,
            "kept": kept, "bob": said_to_bob, "run": team.ended(run_id)}


@pytest.fixture(scope="module")
def expired(team, reset):
    """A second request nobody answers in time; bob's approval after its expiry."""
    team.plant_checkpoint()
    run_id = team.request_reset("one more reset nobody answers in time")
    asked = wait_for("the approval request's expiry", lambda: [
        r for r in json.loads(call(team, "GET", f"{PREFIX}/api/oncall", team.api["bob"].token)[1])
        if r["run_id"] == run_id])[0]
    expires_at = dt.datetime.fromisoformat(asked["expires_at"])
    time.sleep(max(0.0, (expires_at - dt.datetime.now(dt.timezone.utc)).total_seconds()) + 1)
    late = call(team, "POST", f"{PREFIX}/api/oncall/{run_id}/decide", team.api["bob"].token, {"choice": "Approve"})
    return {"run_id": run_id, "late": late, "run": team.ended(run_id)}


def test_the_operators_own_approval_is_refused_on_fabs_pages_and_the_page_says_why(team, reset):
    assert "refused: the requester cannot approve their own request: alice requested this action" in reset["alice"]
    assert 'data-status="403"' in team.pages["alice-approves-her-own"]
    # The request she saw says who may approve, and that she may not.
    assert "You may not approve these requests" in team.pages["alice-approves-her-own-before"]
    assert "Requested by** alice" in team.pages["alice-approves-her-own-before"]
    assert "(not alice, who asked)" in team.pages["alice-approves-her-own-before"]


def test_each_refused_approval_is_a_403_with_its_ops_audit_row_and_the_request_stays_open(team, reset):
    statuses = {name: status for name, (status, _) in reset["rest"].items()}
    assert statuses == {"oscar": 403, "service": 403, "alice": 403}
    said = {name: json.loads(body) for name, (_, body) in reset["rest"].items()}
    assert {name: s["refused"] for name, s in said.items()} == {
        "oscar": "not_an_approver", "service": "service_identity", "alice": "self_approval"}
    assert "oscar may not approve destructive on-call actions" in said["oscar"]["detail"]
    assert f"{SERVICE_USER} is the service identity of the connection airflow_api" in said["service"]["detail"]
    # Straight at Airflow's own answer route, none of them may answer at all (no right to edit required actions).
    assert reset["straight"] == {"alice": 403, "oscar": 403, "service": 403, "vic": 403}
    assert len(reset["still_open"]) == 1 and reset["kept"]  # nothing ran, the request waited for bob
    rows = team.rows(reset["run_id"])
    assert rows[:4] == [("refused", "self_approval", "alice", "alice"), ("refused", "not_an_approver", "alice", "oscar"),
                        ("refused", "service_identity", "alice", SERVICE_USER),
                        ("refused", "self_approval", "alice", "alice")]


def test_the_approver_approves_on_the_page_and_the_reset_runs(team, reset):
    assert "approved: the action runs now (bob)" in reset["bob"]
    assert reset["run"]["state"] == "success"
    [backup] = sorted((team.lake.control_path(JOB) / "backups").glob("*-reset/checkpoint"))
    assert (backup / "metadata").is_file()
    rows = team.rows(reset["run_id"])
    assert len(rows) == 5 and rows[-1] == ("succeeded", "approved", "alice", "bob")
    [done] = [r for r in read_rows(team.lake) if r["run_id"] == reset["run_id"] and r["outcome"] == "succeeded"]
    assert str(backup) in done["message"]


def test_an_approval_after_the_expiry_is_refused_and_audited(team, expired):
    status, body = expired["late"]
    assert status == 403 and json.loads(body)["refused"] == "after_expiry", body
    assert "refused: the request expired at" in json.loads(body)["detail"]
    assert expired["run"]["state"] == "failed"  # expired: nothing ran
    assert team.lake.checkpoint_path(JOB).is_dir()
    assert sorted(team.rows(expired["run_id"]), key=str) == [("expired", "expired", "alice", None),
                                                              ("refused", "after_expiry", "alice", "bob")]


ROUTES = [("GET", "/"), ("GET", f"/job/{JOB}"), ("GET", f"/dag/{JOB}_catchup"), ("GET", "/api/status"),
          ("GET", f"/api/jobs/{JOB}/timeline"), ("GET", f"/api/jobs/{JOB}/progress"), ("GET", "/oncall"),
          ("GET", "/api/oncall"), ("POST", "/oncall/no-such-run/decide"), ("POST", "/api/oncall/no-such-run/decide")]
# What each identity gets on each route, in the order of ROUTES.
EXPECTED = {
    None: [401] * 10,
    "vic": [200] * 6 + [403, 403, 403, 403],
    "alice": [200] * 8 + [403, 403],
    "bob": [200] * 8 + [404, 404],
    "service": [403] * 10,
}


def walk(team: Team, token: str | None) -> list[int]:
    found = []
    for method, route in ROUTES:
        form = {"choice": "Approve"} if method == "POST" and not route.startswith("/api/") else None
        body = {"choice": "Approve"} if method == "POST" and route.startswith("/api/") else None
        found.append(call(team, method, PREFIX + route, token, body, form)[0])
    return found


def test_every_plugin_route_asks_the_auth_manager_for_every_role(team):
    tokens = {None: None, "vic": team.api["vic"].token, "alice": team.api["alice"].token,
              "bob": team.api["bob"].token, "service": team.service.token}
    assert {who: walk(team, token) for who, token in tokens.items()} == EXPECTED
    # Nothing of the app answers without asking: it serves no /docs, /redoc or /openapi.json.
    assert [call(team, "GET", PREFIX + path, team.api["bob"].token)[0] for path in ("/docs", "/redoc",
                                                                                   "/openapi.json")] == [404] * 3


def test_the_viewer_sees_the_health_page_but_cannot_trigger_streaming_oncall(team, browser):
    page = logged_in(team, browser, "vic")
    page.goto(f"{team.airflow.url}{PREFIX}/")
    page.locator("table.jobs").wait_for(timeout=60_000)
    page.screenshot(path=str(team.root / "viewer-health.png"), full_page=True)
    assert page.locator(f"tr[data-job='{JOB}']").count() == 1
    # The trigger as the UI sends it, from vic's own session: refused.
    tried = page.request.post(f"{team.airflow.url}/api/v2/dags/{DAG_ID}/dagRuns",
                              data={"logical_date": None, "conf": {"job": JOB, "action": "restart", "reason": "x"}})
    assert tried.status == 403
    assert team.api["vic"].status("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {}})[0] == 403


def test_a_teammate_added_while_airflow_runs_logs_in_with_their_role_without_a_restart(team):
    name, role = TEAMMATE
    api_server = team.airflow._read_pid("api-server")
    # As a person does it: the password typed at the prompt (here its stdin, no terminal), never on a command line.
    done = subprocess.run(["airflow", "users", "create", "--username", name, "--firstname", "Carol", "--lastname",
                           "Teammate", "--email", f"{name}@example.org", "--role", role],
                          input=f"{PASSWORDS[name]}\n{PASSWORDS[name]}\n", env=team.airflow.component_env,
                          capture_output=True, text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    carol = UserApi(team.airflow.url, name, PASSWORDS[name])
    assert call(team, "GET", f"{PREFIX}/", carol.token)[0] == 200
    assert call(team, "GET", f"{PREFIX}/oncall", carol.token)[0] == 403
    assert carol.status("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {}})[0] == 403
    assert team.airflow._read_pid("api-server") == api_server  # no restart


def test_no_password_or_token_in_a_log_the_audit_table_a_page_or_ps(team, reset, expired):
    found = {**PASSWORDS, "admin": team.airflow.password("admin"), SERVICE_USER: team.airflow.password(SERVICE_USER),
             **{f"{name}'s token": api.token for name, api in team.api.items()}, "the service's token": team.service.token}
    assert all(found.values())
    stores = {team.airflow.passwords_file}  # the one place they are kept (0600)
    assert oct(team.airflow.passwords_file.stat().st_mode & 0o777) == "0o600"
    leaks = []
    for folder in (team.home, team.lake.root):
        for path in folder.rglob("*"):
            if path.is_file() and path not in stores and path.suffix not in (".db", ".parquet"):
                text = path.read_text(errors="replace")
                leaks += [f"{name}'s password in {path}" for name, secret in found.items() if secret in text]
    audit = json.dumps(read_rows(team.lake), default=str)
    leaks += [f"{name}'s password in ops_audit" for name, secret in found.items() if secret in audit]
    pages = "".join(team.pages.values())
    leaks += [f"{name}'s password on a page" for name, secret in found.items() if secret in pages]
    for process in psutil.process_iter():
        try:
            command = " ".join(process.cmdline())
        except psutil.Error:
            continue
        leaks += [f"{name}'s password in the command line of {process.pid}" for name, secret in found.items()
                  if secret in command]
    assert leaks == []


def test_a_home_of_the_simple_auth_manager_moves_to_fab_with_its_runs_audit_and_connections(tmp_path):
    """The documented move (docs/identity.md): a home that ran the simple auth manager, with a DAG run alice
    triggered, a connection and an ops_audit row; ``make airflow`` on it again with FAB (its set-up, alice created
    under the same name): all three are there, and alice's new login sees her run."""
    from spark_jobs.control.oncall.audit import AuditRecord, append
    from tests.helpers.approvals import user_settings

    require_airflow_env()
    home, lake = tmp_path / "airflow_home", Lake(tmp_path / "lake")
    base = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "LAKE_ROOT": str(lake.root), "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    port = free_port(29900)
    simple = LocalAirflow(home, port, {**base, **user_settings(home)}, components=("api-server",), auth="simple")
    try:
        simple.start()
        done = subprocess.run(["airflow", "dags", "reserialize"], env=simple.component_env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        admin, alice = UserApi(simple.url, "admin"), UserApi(simple.url, "alice")
        admin("POST", "/connections", {"connection_id": "team_notes", "conn_type": "http", "host": "notes.example.org"})
        run_id = alice.trigger(DAG_ID, {"job": JOB, "action": "restart", "reason": "before the move"})
    finally:
        simple.stop(grace=10)
    append(lake, AuditRecord(job=JOB, action="restart", parameters={}, reason="before the move", dry_run=False,
                             triggered_by="alice", dag_id=DAG_ID, run_id=run_id, outcome="succeeded"))
    audit_before = read_rows(lake)

    fab = LocalAirflow(home, port, base, components=("api-server",), auth="fab", fab_users=[
        {"username": "alice", "role": roles.OPERATOR, "password": PASSWORDS["alice"]}])
    try:
        fab.start()
        assert sorted(fab.created) == ["admin", "alice", SERVICE_USER]
        admin = UserApi(fab.url, "admin", fab.password("admin"))
        [run] = [r for r in admin.runs(DAG_ID) if r["dag_run_id"] == run_id]
        assert (run["triggering_user_name"], run["conf"]["reason"]) == ("alice", "before the move")
        assert admin("GET", "/connections/team_notes")["host"] == "notes.example.org"
        alice = UserApi(fab.url, "alice", PASSWORDS["alice"])
        assert [r["dag_run_id"] for r in alice.runs(DAG_ID)] == [run_id]
        with pytest.raises(AirflowApiError) as refused:  # the simple auth manager's password is gone with it
            UserApi(fab.url, "alice")
        assert refused.value.status == 401
    finally:
        fab.stop(grace=10)
    assert read_rows(lake) == audit_before
