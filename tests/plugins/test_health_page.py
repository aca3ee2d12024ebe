"""The streaming health page in real headless Chromium, inside a real Airflow UI on loopback.

One Airflow API server for the module (:class:`tools.local_airflow.LocalAirflow`, the code behind
``make airflow``; the DAGs serialized once with ``airflow dags reserialize``), with its own home, port
and lake in pytest's tmp dir, and SimpleAuthManager's login (no all-admins shortcut). Debian's
Chromium (``/usr/bin/chromium``; ``.ci/run`` installs it) is driven by Playwright with a new, empty
profile. The job's states are planted (:mod:`tests.helpers.plant`): the page must
say what the files say, and its plots must carry the numbers of the ``streaming_progress`` rows.
Screenshots are kept under the test's tmp dir (``health_page/*.png``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest

from spark_jobs.control.monitoring.history import read_progress
from spark_jobs.registry import JOBS
from streaming.hooks.airflow_api import AirflowApi
from tools.local_airflow import LocalAirflow, free_port, marked_processes
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.chromium import CHROMIUM_ARGS, chromium
from tests.helpers.plant import JOB, PlantedLake
from tests.helpers.project import PLUGINS, run_cli

NAV = "/plugin/streaming-health"
DAG_TAB = f"/dags/{JOB.name}_continuous/plugin/stream-health"


class Ui:
    """The Airflow, the planted lake it reads, and a logged-in Chromium page."""

    def __init__(self, root) -> None:
        self.root = root
        self.home = root / "airflow_home"
        self.shots = root / "screenshots"
        self.shots.mkdir()
        self.planted = PlantedLake(root / "state")
        env = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING", "LAKE_ROOT": str(self.planted.lake),
               JOB.input_env_var: str(self.planted.landing)}
        env.pop("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", None)
        self.airflow = LocalAirflow(self.home, free_port(28500), env, components=("api-server",),
                                    auth="simple")

    def plant(self, state: str, **kwargs) -> PlantedLake:
        """A fresh lake (same paths: the API server's $LAKE_ROOT) in ``state``."""
        for folder in (self.planted.lake, self.planted.landing):
            shutil.rmtree(folder, ignore_errors=True)
        self.planted = PlantedLake(self.planted.root)
        getattr(self.planted, state)(**kwargs)
        return self.planted

    def token(self) -> str:
        return AirflowApi.login(self.airflow.url, "admin", self.airflow.password()).token

    def frame(self, path: str | None, title: str, shot: str):
        """Open ``path`` of the UI (None: the home page, then Browse → Streaming health in the
        navigation); the plugin's iframe, once its job table is there."""
        if path is None:
            self.page.goto(self.airflow.url + "/")
            self.page.get_by_role("button", name="Browse").click()
            self.page.get_by_role("menuitem", name="Streaming health").click()
        else:
            self.page.goto(self.airflow.url + path)
        frame = self.page.frame_locator(f"iframe[title='{title}']")
        frame.locator("table.jobs").wait_for(timeout=60_000)
        self.page.screenshot(path=str(self.shots / f"{shot}.png"), full_page=True)
        return frame


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    require_airflow_env()
    ui = Ui(tmp_path_factory.mktemp("health_page"))
    ui.plant("healthy")
    try:
        ui.airflow.start()
        done = subprocess.run(["airflow", "dags", "reserialize"], env=ui.airflow.component_env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(ui.root / "chromium-profile"), executable_path=chromium(), headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 1000})
            try:
                ui.page = context.new_page()
                ui.page.goto(ui.airflow.url + NAV)  # behind the login: SimpleAuthManager's form first
                ui.page.get_by_label("Username").fill("admin")
                ui.page.get_by_label("Password").fill(ui.airflow.password())
                ui.page.get_by_role("button", name="Sign in").click()
                ui.page.wait_for_url(f"**{NAV}", timeout=60_000)
                yield ui
            finally:
                context.close()
    finally:
        ui.airflow.stop(grace=20)
    assert marked_processes(str(ui.home)) == {}, "processes of the test Airflow outlived `stop`"
    left = [" ".join(child.cmdline()) for child in psutil.Process().children(recursive=True)
            if child.status() != psutil.STATUS_ZOMBIE and ("chromium" in child.name() or "playwright" in
                                                            " ".join(child.cmdline()))]
    assert left == [], "Chromium or Playwright's driver outlived the browser"


def get(ui: Ui, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(ui.airflow.url + path, headers=headers),
                                    timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_anonymous_requests_are_refused(ui):
    routes = ["/streaming-health/", f"/streaming-health/job/{JOB.name}", f"/streaming-health/dag/{JOB.name}_catchup",
              "/streaming-health/api/status", f"/streaming-health/api/jobs/{JOB.name}/progress",
              "/streaming-health/metrics"]
    assert [get(ui, route)[0] for route in routes] == [401] * len(routes)
    assert get(ui, "/streaming-health/", token="not-a-token")[0] == 403

    token = ui.token()
    assert [get(ui, route, token)[0] for route in routes] == [200] * len(routes)
    status = json.loads(get(ui, "/streaming-health/api/status", token)[1])
    assert [job["job"] for job in status["jobs"]] == list(JOBS)
    assert {job["job"]: job["state"] for job in status["jobs"]}[JOB.name] == "healthy"


def test_prometheus_scrapes_the_metrics_with_a_bearer_token_and_they_equal_the_status(ui):
    from prometheus_client.parser import text_string_to_metric_families

    planted = ui.plant("stalled")
    token = ui.token()
    code, text = get(ui, "/streaming-health/metrics", token)
    assert code == 200
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(text) for s in family.samples}
    status = {job["job"]: job for job in json.loads(get(ui, "/streaming-health/api/status", token)[1])["jobs"]}[JOB.name]
    job = (("job", JOB.name),)
    assert found[("streaming_job_state", job + (("state", "stalled"),))] == 1.0
    assert found[("streaming_backlog_files", job)] == status["backlog_files"] == 6
    assert found[("streaming_restarts_total", job)] == status["restarts"]["all_time"] == 1
    assert found[("streaming_last_commit_batch", job)] == status["latest_commit_batch"] == 2
    assert found[("streaming_lease_holder", job + (("kind", "continuous"),))] == 1.0
    targets = json.loads((planted.lake / "control" / "prometheus_targets.json").read_text())
    assert targets == [{"targets": ["127.0.0.1:4040"], "labels": {
        "streaming_job": JOB.name, "holder_kind": "continuous", "__metrics_path__": "/metrics/prometheus/"}}]


def test_the_page_lists_every_job_and_says_a_stalled_job_is_stalled(ui):
    planted = ui.plant("stalled")
    frame = ui.frame(None, "Streaming health", "stalled")  # through the UI's navigation

    rows = frame.locator("table.jobs tr[data-job]")
    assert [rows.nth(i).get_attribute("data-job") for i in range(rows.count())] == list(JOBS)
    row = frame.locator(f"tr[data-job='{JOB.name}']")
    assert (row.get_attribute("data-state"), row.get_attribute("data-backlog"),
            row.get_attribute("data-backlog-bytes"), row.get_attribute("data-last-commit-batch")) == (
        "stalled", "6", "0", "2")
    reasons = frame.locator(f"section[data-job='{JOB.name}'] [data-quarantine-reasons]")
    assert json.loads(reasons.get_attribute("data-quarantine-reasons")) == {
        "cloudtrail_quarantine": {"invalid_json": 3, "bad_event_time": 1}}  # the metric's numbers (test_metrics)
    assert reasons.inner_text() == "Quarantined: cloudtrail_quarantine: invalid_json 3, bad_event_time 1"
    assert "20 min ago (batch 2)" in row.inner_text()
    assert "1/5" in row.inner_text()  # restarts in the window / budget
    condition = frame.locator(f"section[data-job='{JOB.name}'] [data-condition='stalled']")
    assert "while 6 input file(s) wait" in condition.inner_text() and "Do: " in condition.inner_text()
    # The terminal view says the same.
    done = run_cli("status", "--lake", str(planted.lake), "--json", env={JOB.input_env_var: str(planted.landing)})
    assert {j["job"]: j["state"] for j in json.loads(done.stdout)["jobs"]}[JOB.name] == "stalled"


def series(frame, chart: str, name: str) -> dict[int, float]:
    points = frame.locator(f"section[data-job='{JOB.name}'] [data-chart='{chart}'] circle[data-series='{name}']")
    return {int(points.nth(i).get_attribute("data-batch")): float(points.nth(i).get_attribute("data-value"))
            for i in range(points.count())}


def test_a_lagging_job_and_its_plots_carry_the_real_numbers(ui):
    planted = ui.plant("lagging", healthy_before=14)
    frame = ui.frame(NAV, "Streaming health", "lagging")

    row = frame.locator(f"tr[data-job='{JOB.name}']")
    assert (row.get_attribute("data-state"), row.get_attribute("data-backlog")) == ("lagging", "40")
    assert frame.locator(f"[data-condition='falling_behind']").count() == 1
    rows = read_progress(planted.lake, JOB.name, limit=None)
    assert len(rows) == 20
    by_batch = {r["batch_id"]: r for r in rows}
    assert series(frame, "rates", "input") == {b: r["input_rows_per_second"] for b, r in by_batch.items()}
    assert series(frame, "rates", "processed") == {b: r["processed_rows_per_second"] for b, r in by_batch.items()}
    assert series(frame, "duration", "batch") == {b: r["batch_duration_ms"] for b, r in by_batch.items()}
    assert series(frame, "duration", "addBatch") == {b: r["duration_ms"]["addBatch"] for b, r in by_batch.items()}
    for table in ("cloudtrail_events", "cloudtrail_quarantine"):
        assert series(frame, "rows", table) == {b: r["rows"][table] for b, r in by_batch.items()}
    assert series(frame, "quarantine", "quarantined") == pytest.approx(
        {b: r["quarantine_rate"] * 100 for b, r in by_batch.items()})
    assert series(frame, "backlog", "backlog") == {b: r["backlog_files"] for b, r in by_batch.items()}
    state_note = frame.locator(f"section[data-job='{JOB.name}'] [data-chart='state_rows']").inner_text()
    assert "no stateful operators" in state_note

    # The same job on its DAG's tab.
    tab = ui.frame(DAG_TAB, "Stream health", "dag-tab")
    assert tab.locator(f"tr[data-job='{JOB.name}']").get_attribute("data-state") == "lagging"
    assert len(series(tab, "rates", "input")) == 20


def test_the_running_version_the_one_on_probation_and_the_last_rollback_are_on_the_page(ui):
    planted = ui.plant("deploying")
    frame = ui.frame(NAV, "Streaming health", "deploying")

    versions = frame.locator(f"section[data-job='{JOB.name}'] p.versions")
    assert [versions.get_attribute(f"data-{name}") for name in ("version", "probation-version", "probation-batches",
                                                                 "last-rollout-version", "last-rollout-phase")] == [
        "v3", "v3", "2", "v4", "rolled_back"]
    running, probation, last = versions.inner_text().splitlines()
    assert running == "version: v3"
    assert re.fullmatch(r"on probation: v3 \(from v2\), 2 of 3 batches, \d+ of 300 s, since \S+", probation), probation
    assert last == ("last rollout: v2 -> v4, rolled back at 2026-12-07T10:04:37.000+00:00: version v4 failed on "
                    "probation: the driver exited with status 1; v2 starts again")
    # The terminal view says the same, under the job's line.
    done = run_cli("status", "--lake", str(planted.lake), env={JOB.input_env_var: str(planted.landing)})
    lines = done.stdout.splitlines()
    at = lines.index("  version: v3")
    assert lines[at + 1].startswith("  on probation: v3 (from v2), 2 of 3 batches, ") and lines[at + 2] == f"  {last}"


def test_a_dag_that_runs_no_job_says_so(ui):
    status, body = get(ui, "/streaming-health/dag/lake_maintenance", ui.token())
    assert status == 200 and "DAG lake_maintenance runs no streaming job" in body


def test_an_unknown_job_is_a_404_with_the_registrys_message(ui):
    token = ui.token()
    routes = ["/streaming-health/job/nope", "/streaming-health/api/jobs/nope/timeline",
              "/streaming-health/api/jobs/nope/progress"]
    answers = [get(ui, route, token) for route in routes]
    message = f"unknown job 'nope'; known jobs: {', '.join(sorted(JOBS))}"
    assert [(status, json.loads(body)) for status, body in answers] == [(404, {"detail": message})] * len(routes)


def test_the_page_and_its_plugin_import_no_pyspark(tmp_path):
    """What the API server runs for the page (the plugin's load, the summary, the history, the HTML),
    in a fresh interpreter: no pyspark module gets imported."""
    planted = PlantedLake(tmp_path)
    planted.lagging()
    probe = ("import sys; from airflow import plugins_manager as pm; pm.ensure_plugins_loaded(); "
             "from streaming.health_page import render_page; from spark_jobs.control.monitoring.health import check_job; "
             "from spark_jobs.control.monitoring.history import read_progress; from spark_jobs.control.monitoring.status import collect; "
             "from spark_jobs.registry import JOBS; lake = sys.argv[1]; "
             "html = render_page([check_job(j, lake) for j in JOBS.values()], "
             "{j: read_progress(lake, j) for j in JOBS}, lake); collect(lake); "
             "print('lagging' in html, sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')), "
             "flush=True); import os; os._exit(0)")
    # os._exit: the probe is about imports; once, under load, this interpreter (Airflow's plugin machinery,
    # pyarrow and delta-rs loaded) aborted in C++ teardown at exit, which an API server never reaches per request.
    done = subprocess.run([sys.executable, "-c", probe, str(planted.lake)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, JOB.input_env_var: str(planted.landing),
                                            "PYTHONPATH": f"{PLUGINS}{os.pathsep}{os.environ['PYTHONPATH']}"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "True []"
