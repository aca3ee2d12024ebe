"""cloudtrail_etl_continuous under a real Airflow scheduler on loopback: start, kill -9, stop, give up.

One Airflow (api-server, scheduler, dag-processor, triggerer; :mod:`tools.local_airflow`, the
code behind ``make airflow``) runs for the whole module with its own home, port, lake and landing
folder in pytest's tmp dir, and a webhook server on 127.0.0.1 that records every alert. The tests
run in order and share it: a driver is started by unpausing the DAG, killed with kill -9 and
restarted, replaced by the on-call DAG's ``restart`` (``streaming_oncall``: it clears ``supervise``
through the REST API), stopped by marking ``supervise`` failed, started again and stopped by the
on-call ``stop`` (it pauses the DAG), then ``resume_supervision`` unpauses it for a driver that always
fails at start, which is given up on once. The live driver's UI is scraped as Prometheus would
(Spark's streaming gauges), and the health trigger's alerts are told apart from the supervisor's
events on the webhook.

Short policy values come from the operator's test overrides (``$STREAMING_SUPERVISOR_POLICY``,
``$STREAMING_CONTINUOUS_TRIGGER``), set only in this Airflow's environment.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.dags.conftest import PROJECT_ROOT, require_airflow_env
from tests.dags.real_airflow import RestApi, wait_for

sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
from tools.local_airflow import LocalAirflow, free_port, marked_processes  # noqa: E402

from spark_jobs.model.lake import Lake  # noqa: E402
from spark_jobs.control.ops_audit import read_rows  # noqa: E402

DAG_ID = "cloudtrail_etl_continuous"
JOB = "cloudtrail_etl"
POLICY = {"initial_backoff_seconds": 1, "multiplier": 2, "max_backoff_seconds": 2, "max_restarts": 2,
          "window_seconds": 900, "poll_seconds": 1, "stop_grace_seconds": 40}
ONCALL = "streaming_oncall"


class Webhook:
    """An HTTP server on 127.0.0.1 that records the JSON body of every POST."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                posts.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/alerts"

    def kinds(self) -> list[str]:
        """The supervisor's events (a health alert has a ``code``: see :meth:`health_alerts`)."""
        return [post.get("kind") for post in self.posts if "code" not in post]

    def health_alerts(self) -> list[tuple[str, str]]:
        """(kind, code) of each health alert the checkpoint-health trigger sent."""
        return [(post["kind"], post["code"]) for post in self.posts if "code" in post]


class Setup:
    """The shared Airflow, lake, landing folder and webhook, and what the tests do with them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.landing, self.lake, self.home = root / "landing", root / "lake", root / "airflow_home"
        self.landing.mkdir()
        self.webhook = Webhook()
        self.expected: list[str] = []
        env = {
            **os.environ,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "LAKE_ROOT": str(self.lake),
            "CLOUDTRAIL_ETL_INPUT": str(self.landing),
            "SUPERVISOR_WEBHOOK_URL": self.webhook.url,
            "STREAMING_CONTINUOUS_TRIGGER": "processing-time:1s",
            "STREAMING_SUPERVISOR_POLICY": json.dumps(POLICY),
        }
        self.airflow = LocalAirflow(self.home, free_port(), env)

    # -- the REST API ----------------------------------------------------------------------------

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        return RestApi(self.airflow.url)(method, path, body)

    def oncall(self, action: str) -> dict:
        """Trigger ``streaming_oncall`` for ``action`` on the job as a person does; its run once it ended."""
        self.api("PATCH", f"/dags/{ONCALL}", {"is_paused": False})
        run = self.api("POST", f"/dags/{ONCALL}/dagRuns", {"logical_date": None, "conf": {
            "job": JOB, "action": action, "reason": f"the test's {action}"}})
        return wait_for(f"the on-call {action} to end", lambda: (r := self.api(
            "GET", f"/dags/{ONCALL}/dagRuns/{run['dag_run_id']}"))["state"] in ("success", "failed") and r)

    def set_paused(self, paused: bool) -> None:
        self.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": paused})

    def is_paused(self) -> bool:
        return self.api("GET", f"/dags/{DAG_ID}")["is_paused"]

    def runs(self) -> list[dict]:
        return self.api("GET", f"/dags/{DAG_ID}/dagRuns?order_by=id")["dag_runs"]

    def task_states(self, run_id: str) -> dict[str, str | None]:
        return RestApi(self.airflow.url).task_states(DAG_ID, run_id)

    def xcom(self, run_id: str, task_id: str, key: str):
        return RestApi(self.airflow.url).xcom(DAG_ID, run_id, task_id, key)

    # -- the lake and the process table ----------------------------------------------------------

    def land(self, name: str, files: int = 2, records: int = 3) -> None:
        """``files`` gzipped CloudTrail deliveries of ``records`` fresh events each, landed atomically."""
        folder = self.landing / "AWSLogs" / "123456789012" / "CloudTrail" / "us-east-1" / "2024" / "03" / "02"
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(files):
            ids = [f"{name}-{f}-{r}" for r in range(records)]
            document = {"Records": [{"eventVersion": "1.08", "eventID": event_id,
                                     "eventTime": f"2024-03-02T10:{f:02d}:{r:02d}Z",
                                     "eventSource": "s3.amazonaws.com", "eventName": "GetObject",
                                     "awsRegion": "us-east-1"} for r, event_id in enumerate(ids)]}
            final = folder / f"123456789012_CloudTrail_us-east-1_20240302T10{f:02d}Z_{name}.json.gz"
            temp = final.with_name(final.name + ".tmp")
            temp.write_bytes(gzip.compress(json.dumps(document).encode()))
            temp.rename(final)
            self.expected += ids

    def event_ids(self) -> list[str]:
        """Every eventID in cloudtrail_events, read through the Delta log with delta-rs (none before it exists)."""
        table = self.lake / "tables" / "cloudtrail_events"
        if (table / "_delta_log").is_dir():
            from deltalake import DeltaTable
            from deltalake.exceptions import TableNotFoundError

            try:
                return sorted(DeltaTable(str(table)).to_pyarrow_table(columns=["eventID"])["eventID"].to_pylist())
            except TableNotFoundError:  # the log has no commit yet
                return []
        return []

    @property
    def control(self) -> Path:
        return self.lake / "control" / JOB

    def supervisor_state(self) -> dict:
        path = self.control / "supervisor.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def events(self) -> list[dict]:
        path = self.control / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def drivers(self) -> dict[int, str]:
        """Every spark-submit JVM or Python driver of this test's lake (the process table)."""
        return {pid: command for pid, command in marked_processes(str(self.home)).items()
                if "spark_jobs/__main__.py" in command or "SparkSubmit" in command}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    require_airflow_env()
    setup = Setup(tmp_path_factory.mktemp("continuous"))
    try:
        setup.airflow.start()
        wait_for(f"the dag-processor to parse {DAG_ID}", lambda: setup.api("GET", f"/dags/{DAG_ID}"))
        yield setup
    finally:
        setup.airflow.stop(grace=20)
        setup.webhook.server.shutdown()
    assert marked_processes(str(setup.home)) == {}, "processes of the test Airflow outlived `stop`"


@pytest.fixture(scope="module")
def first_run(setup):
    """Unpause: the scheduler starts a continuous run, whose supervisor starts the driver."""
    setup.land("a")
    setup.set_paused(False)
    [run] = wait_for("the first continuous run", setup.runs)
    wait_for("the first batch in cloudtrail_events", lambda: setup.event_ids() == sorted(setup.expected))
    return run


def live_driver(setup: Setup) -> dict:
    """The supervisor's state once its driver holds the lease and runs."""
    return wait_for("a running driver", lambda: (s := setup.supervisor_state()).get("state") == "running"
                    and s.get("driver_pid") and s)


def test_unpaused_dag_runs_the_driver_and_it_commits(setup, first_run):
    run_id = first_run["dag_run_id"]
    state = live_driver(setup)
    assert setup.event_ids() == sorted(setup.expected)
    assert state["driver_pid"] in setup.drivers()
    assert setup.task_states(run_id)["supervise"] == "running"
    # The health sensor waits in the triggerer, holding no worker slot (between two reports it is
    # on a worker for a moment).
    wait_for("the sensor to wait deferred", lambda: setup.task_states(run_id)["checkpoint_health"] == "deferred")
    pushed = wait_for("the supervisor state in XCom", lambda: setup.xcom(run_id, "supervise", "supervisor"))
    assert pushed["job"] == JOB and pushed["max_restarts"] == POLICY["max_restarts"]
    assert state["consecutive_failures"] == 0
    # Each change of the checkpoint's health came back to a worker for a moment, went to XCom, and
    # the sensor deferred again.
    health = wait_for("a healthy checkpoint in XCom", lambda: (h := setup.xcom(run_id, "checkpoint_health", "health"))
                      and h["status"] in ("healthy", "in_flight") and h)
    assert health["driver"]["pid"] == state["driver_pid"]  # the Python driver holding the lease
    assert health["health"]["state"] == "healthy" and health["health"]["conditions"] == []


def gauges(text: str) -> dict[str, float]:
    """The query's gauges in Prometheus' text format (each is ``<name>_Value{type="gauges"} <value>``)."""
    prefix, suffix = f"metrics_{JOB}_driver_spark_streaming_{JOB}_", '_Value{type="gauges"}'
    found = {}
    for line in text.splitlines():
        metric, _, value = line.rpartition(" ")
        if metric.startswith(prefix) and metric.endswith(suffix):
            found[metric[len(prefix):-len(suffix)]] = float(value)
    return found


def test_the_driver_serves_its_streaming_gauges_for_prometheus(setup, first_run):
    """The DAG's spark-submit carries Spark's streaming metrics and the PrometheusServlet sink: the
    driver's UI (on the free port Spark found, named in its lease) answers as Prometheus scrapes it."""
    from spark_jobs.control.checkpoint.lease import read_lease
    from spark_jobs.control.monitoring.prometheus import PROMETHEUS_PATH

    live_driver(setup)
    ui = wait_for("the driver's UI in its lease",
                  lambda: (lease := read_lease(str(setup.control))) and lease.details.get("spark_ui"))

    def scrape() -> dict[str, float]:
        with urllib.request.urlopen(f"{ui}{PROMETHEUS_PATH}/", timeout=30) as response:
            found = gauges(response.read().decode())
        return found if found.get("latency", 0) > 0 else {}

    found = wait_for("the query's gauges", scrape, timeout=120)
    assert {"inputRate_total", "processingRate_total", "latency", "eventTime_watermark", "states_rowsTotal",
            "states_usedBytes"} <= set(found)
    assert found["states_rowsTotal"] == 0  # no stateful operator in this job


def test_kill_9_of_the_driver_is_restarted_and_tables_stay_exact(setup, first_run):
    before = live_driver(setup)
    os.kill(before["driver_pid"], signal.SIGKILL)
    setup.land("b")

    wait_for("the restart", lambda: setup.supervisor_state().get("restarts_total") == 1)
    after = live_driver(setup)
    wait_for("batch b in cloudtrail_events", lambda: len(setup.event_ids()) >= len(setup.expected))

    assert setup.event_ids() == sorted(setup.expected)  # nothing lost, nothing twice
    assert after["driver_pid"] != before["driver_pid"]
    assert [e["kind"] for e in setup.events()] == ["start", "restart"]
    assert setup.webhook.kinds() == ["restart"]
    assert setup.webhook.posts[0]["dag_id"] == DAG_ID and setup.webhook.posts[0]["job"] == JOB
    assert setup.webhook.health_alerts() == []  # one restart is the supervisor's business, not an incident


def test_oncall_restart_clears_supervise_and_replaces_the_driver_in_the_same_run(setup, first_run):
    run_id = first_run["dag_run_id"]
    before = live_driver(setup)
    seen = len(setup.events())
    oncall = setup.oncall("restart")  # clears `supervise` through the REST API, waits for the new driver's lease

    assert oncall["state"] == "success"
    [audit] = [r for r in read_rows(Lake(setup.lake)) if r["action"] == "restart"]
    assert audit["outcome"] == "succeeded" and f"pid {before['driver_pid']} " in audit["message"]

    # The cleared task is stopped (its on_kill stops the driver), then runs again: a new supervisor.
    wait_for("a new supervision", lambda: [e for e in setup.events()[seen:] if e["kind"] == "start"])
    after = wait_for("the new driver", lambda: (s := live_driver(setup))["driver_pid"] != before["driver_pid"] and s)
    assert before["driver_pid"] not in setup.drivers()
    assert set(setup.drivers()) >= {after["driver_pid"]}
    tis = setup.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
    assert {ti["task_id"]: ti["try_number"] for ti in tis}["supervise"] == 2
    assert setup.webhook.kinds() == ["restart"]  # a stop is not an alert


def test_marking_supervise_failed_leaves_no_driver(setup, first_run):
    run_id = first_run["dag_run_id"]
    live_driver(setup)
    setup.api("PATCH", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/supervise", {"new_state": "failed"})

    wait_for("no driver process", lambda: not setup.drivers(), timeout=180)
    # A run whose task a person failed is a failed run: the DAG pauses itself until unpaused.
    wait_for("the run to fail", lambda: setup.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"] == "failed")
    assert setup.is_paused()
    assert setup.task_states(run_id) == {"supervise": "failed", "checkpoint_health": "success"}
    assert setup.event_ids() == sorted(setup.expected)


def test_oncall_stop_pauses_the_dag_and_the_driver_stops_after_its_micro_batch(setup, first_run):
    setup.land("c")
    setup.set_paused(False)
    run = wait_for("a second continuous run", lambda: len(runs := setup.runs()) == 2 and runs[-1])
    started = len(setup.events())
    live_driver(setup)
    wait_for("batch c in cloudtrail_events", lambda: setup.event_ids() == sorted(setup.expected))

    oncall = setup.oncall("stop")  # pauses the DAG through the REST API, waits until the lease is released
    assert oncall["state"] == "success"
    [audit] = [r for r in read_rows(Lake(setup.lake)) if r["action"] == "stop"]
    assert audit["outcome"] == "succeeded" and '"released": true' in audit["message"]
    stop = wait_for("the stop event", lambda: [e for e in setup.events()[started:] if e["kind"] == "stop"])[-1]
    assert stop["exit_code"] == 0, stop
    assert stop["outcome"].startswith("the driver stopped after its micro-batch"), stop
    assert not setup.drivers()
    # Both tasks end while the DAG is paused: the sensor ends from the triggerer (the scheduler would
    # never start it on a worker now).
    wait_for("both tasks to succeed", lambda: setup.task_states(run["dag_run_id"]) == {
        "supervise": "success", "checkpoint_health": "success"})
    assert setup.is_paused()
    assert setup.supervisor_state()["state"] == "stopped"
    assert setup.event_ids() == sorted(setup.expected)


def test_restart_storm_ends_in_one_alert_and_a_paused_dag(setup, first_run):
    alerts_before = list(setup.webhook.kinds())
    # A driver that always fails at start: its input folder does not exist.
    run = setup.api("POST", f"/dags/{DAG_ID}/dagRuns",
                    {"logical_date": None, "conf": {"input": str(setup.root / "no-such-folder")}})
    assert setup.oncall("resume_supervision")["state"] == "success"  # unpauses the DAG (it was stopped)

    wait_for("the give-up", lambda: setup.task_states(run["dag_run_id"]).get("supervise") == "failed")
    wait_for("the DAG to pause itself", setup.is_paused)
    time.sleep(3)  # an extra alert would arrive now

    assert setup.webhook.kinds()[len(alerts_before):] == ["restart"] * POLICY["max_restarts"] + ["give_up"]
    # The health trigger also opens a restarts-over-budget incident when it polls after the give-up
    # (it may see the task end first): at most that one alert, never one per poll.
    assert setup.webhook.health_alerts() in ([], [("opened", "restarts_over_budget")])
    assert [e["kind"] for e in setup.events()].count("give_up") == 1
    assert "does not exist" in setup.supervisor_state()["last_reason"]
    assert setup.supervisor_state()["state"] == "given_up"
    assert not setup.drivers()
