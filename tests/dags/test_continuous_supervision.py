"""cloudtrail_etl_continuous under a real Airflow scheduler on loopback, started by ``make airflow``'s own harness:
start beside a catch-up run, kill -9, catch-up runs that leave it alone, on-call restart / stop / resume_supervision
through the REST API, stop, give up, and the night on the health page.

One Airflow (api-server, scheduler, dag-processor, triggerer) runs for the whole module, started as ``make airflow``
starts it: ``python tools/local_airflow.py start`` (and stopped with ``... stop``), with the simple auth manager's
login (no all-admins shortcut), a second user (alice, role user) and the service user and ``airflow_api`` connection
the harness makes itself; its own home, port, lake and landing folder in pytest's tmp dir, and a webhook server on
127.0.0.1 that records every alert. The tests run in order and share it:

1. a catch-up run (``cloudtrail_etl_catchup``, its files one per micro-batch) holds the checkpoint's lease when the DAG
   is unpaused: the supervisor waits for it (no restart counted) and the continuous driver commits after it ended;
2. the driver is killed with kill -9 and restarted (the first restart of the whole budget);
3. with the catch-up DAG unpaused, files landing are the continuous driver's (the landing's watcher fires only for
   files no stream has taken), and a catch-up run started meanwhile finds the driver owning the job: each catch-up
   run ends at once as a success that says so, none failed or up for retry; a catch-up run with a bad input fails,
   with its reason on the job's record;
4. alice's on-call ``restart`` (``streaming_oncall``: it clears ``supervise`` through the REST API with the harness's
   connection) replaces the driver; marking ``supervise`` failed stops it; started again, the on-call ``stop`` pauses
   the DAG; ``resume_supervision`` unpauses it for a driver that always fails at start, given up on once: each action
   succeeds and is audited, its task log holds the plan and the result, and the service user's password is in no log,
   command line or page;
5. the health page, in real headless Chromium, lists the catch-up run with its rows, the restart and the failed run,
   in that order.

The live driver's UI is scraped as Prometheus would (Spark's streaming gauges), and the health trigger's alerts are
told apart from the supervisor's events on the webhook. Short policy values come from the operator's test overrides
(``$STREAMING_SUPERVISOR_POLICY``, ``$STREAMING_CONTINUOUS_TRIGGER``), set only in this Airflow's environment.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.real_airflow import HarnessAirflow, RestApi, wait_for

from tools.local_airflow import SERVICE_USER, marked_processes

from spark_jobs.model.lake import Lake
from spark_jobs.control.monitoring.runs import read_runs
from spark_jobs.control.oncall.audit import read_rows

DAG_ID = "cloudtrail_etl_continuous"
CATCHUP = "cloudtrail_etl_catchup"
JOB = "cloudtrail_etl"
CATCHUP_FILES = 10  # read one per micro-batch: the catch-up run holds the lease for a while (~40 s here)
# Without the registry's warm standby: these are cold restarts (its take-overs: test_standby_take_over.py).
POLICY = {"initial_backoff_seconds": 1, "multiplier": 2, "max_backoff_seconds": 2, "max_restarts": 2,
          "window_seconds": 900, "poll_seconds": 1, "stop_grace_seconds": 40, "warm_standby": False}
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


class Setup(HarnessAirflow):
    """The shared Airflow, lake, landing folder and webhook, and what the tests do with them."""

    def __init__(self, root: Path) -> None:
        webhook = Webhook()
        super().__init__(root, {"SUPERVISOR_WEBHOOK_URL": webhook.url,
                                "STREAMING_CONTINUOUS_TRIGGER": "processing-time:1s",
                                "STREAMING_SUPERVISOR_POLICY": json.dumps(POLICY)})
        self.landing.mkdir()
        self.webhook = webhook
        self.expected: list[str] = []
        self.started: subprocess.CompletedProcess | None = None

    # -- the REST API ----------------------------------------------------------------------------

    def oncall(self, action: str) -> dict:
        """alice triggers ``streaming_oncall`` for ``action`` on the job (the DAG is unpaused at creation); its run
        once it ended, with the task's log."""
        alice = self.login("alice")
        run = alice("POST", f"/dags/{ONCALL}/dagRuns", {"logical_date": None, "conf": {
            "job": JOB, "action": action, "reason": f"the test's {action}"}})
        ended = wait_for(f"the on-call {action} to end", lambda: (r := self.api(
            "GET", f"/dags/{ONCALL}/dagRuns/{run['dag_run_id']}"))["state"] in ("success", "failed") and r)
        log = self.api("GET", f"/dags/{ONCALL}/dagRuns/{run['dag_run_id']}/taskInstances/act/logs/1?full_content=true")
        return {**ended, "log": json.dumps(log)}

    def catchup_runs(self) -> list[dict]:
        return self.login("admin").runs(CATCHUP)

    def settled_catchup_runs(self) -> list[dict]:
        """Every catch-up run, once none is queued or running and no asset event waits for one."""
        def settled():
            if self.api("GET", f"/dags/{CATCHUP}/assets/queuedEvents")["total_entries"]:
                return None
            runs = self.catchup_runs()
            return runs if all(r["state"] in ("success", "failed") for r in runs) else None

        return wait_for("the catch-up runs to settle", settled)

    def catchup_tasks(self, run_id: str) -> dict[str, tuple[str | None, int]]:
        """task -> (state, try number) of a catch-up run."""
        tis = self.api("GET", f"/dags/{CATCHUP}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: (ti["state"], ti["try_number"]) for ti in tis}

    def set_paused(self, paused: bool) -> None:
        self.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": paused})

    def is_paused(self) -> bool:
        return self.api("GET", f"/dags/{DAG_ID}")["is_paused"]

    def runs(self) -> list[dict]:
        return self.api("GET", f"/dags/{DAG_ID}/dagRuns?order_by=id")["dag_runs"]

    def task_states(self, run_id: str, dag_id: str = DAG_ID) -> dict[str, str | None]:
        return self.login("admin").task_states(dag_id, run_id)

    def xcom(self, run_id: str, task_id: str, key: str, dag_id: str = DAG_ID):
        return self.login("admin").xcom(dag_id, run_id, task_id, key)

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
        setup.started = setup.harness("start")
        assert setup.started.returncode == 0, setup.started.stdout + setup.started.stderr
        wait_for(f"the dag-processor to parse {DAG_ID} and {ONCALL}",
                 lambda: setup.api("GET", f"/dags/{DAG_ID}") and setup.api("GET", f"/dags/{ONCALL}"))
        yield setup
    finally:
        stopped = setup.harness("stop")
        setup.webhook.server.shutdown()
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert marked_processes(str(setup.home)) == {}, "processes of the test Airflow outlived `stop`"


@pytest.fixture(scope="module")
def first_run(setup):
    """A catch-up run holds the checkpoint's lease when the DAG is unpaused: the scheduler starts a continuous run,
    whose supervisor waits for the catch-up run and then starts the driver.

    The catch-up run reads its files one per micro-batch (its form's ``max_files_per_trigger``), so it holds the lease
    long enough; it is triggered while its DAG is paused with a ``run_after`` in the past, so the scheduler runs it
    before the cron's run that unpausing adds (queued runs go by ``run_after``)."""
    from spark_jobs.control.checkpoint.lease import read_lease

    setup.land("catchup", files=CATCHUP_FILES)
    catchup = setup.api("POST", f"/dags/{CATCHUP}/dagRuns", {"logical_date": None, "run_after": "2025-01-01T00:00:00Z",
                                                             "conf": {"max_files_per_trigger": 1}})
    setup.api("PATCH", f"/dags/{CATCHUP}", {"is_paused": False})
    holder = wait_for("the catch-up run's driver holding the lease", lambda: (
        lease := read_lease(str(setup.control))) and not lease.released and lease.details.get("trigger") ==
        "available-now" and lease, every=0.5)
    setup.set_paused(False)
    [run] = wait_for("the first continuous run", setup.runs)
    waiting = wait_for("the supervisor waiting for the lease", lambda: (
        s := setup.supervisor_state()).get("state") == "waiting_for_lease" and s, every=0.5)
    by_id = {r["dag_run_id"]: r for r in setup.catchup_runs()}
    assert by_id[catchup["dag_run_id"]]["state"] == "running", "the catch-up run ended before the supervisor looked"
    running = live_driver(setup)
    setup.land("a")
    wait_for("the first batches in cloudtrail_events", lambda: setup.event_ids() == sorted(setup.expected))
    settled = setup.settled_catchup_runs()  # its landing watcher keeps watching: the DAG stays unpaused
    return {**run, "catchup": catchup["dag_run_id"], "catchup_runs": settled, "holder": holder, "waiting": waiting,
            "running": running}


def live_driver(setup: Setup) -> dict:
    """The supervisor's state once its driver holds the lease and runs."""
    return wait_for("a running driver", lambda: (s := setup.supervisor_state()).get("state") == "running"
                    and s.get("driver_pid") and s)


def test_a_catchup_run_holding_the_lease_is_waited_for_and_the_driver_commits_after_it(setup, first_run):
    """The continuous driver is not started into the catch-up run's lease: the supervisor waits (no restart counted,
    the budget untouched), names the run it waits for, and starts the driver once the run ended."""
    holder, waiting = first_run["holder"], first_run["waiting"]
    assert waiting["waiting_for"].startswith(f"the catch-up run pid {holder.pid} on host {holder.host} since ")
    assert waiting["waiting_for"].endswith(f" (run {first_run['catchup']} of {CATCHUP})")
    runs = {r["dag_run_id"]: r for r in first_run["catchup_runs"]}
    assert runs[first_run["catchup"]]["state"] == "success"
    assert setup.catchup_tasks(first_run["catchup"]) == {"plan": ("success", 1), "spark_submit": ("success", 1)}
    assert [e["kind"] for e in setup.events()] == ["start", "lease_wait", "lease_free"]
    state = setup.supervisor_state()
    assert (state["restarts_in_window"], state["restarts_total"], state["consecutive_failures"],
            state["lease_waits"]) == (0, 0, 0, 1)
    assert setup.webhook.kinds() == []  # a wait is nobody's alert
    # The catch-up run is on the job's record with what it loaded: every file, one micro-batch each.
    [record] = [r for r in read_runs(str(setup.control)) if r["run_id"] == first_run["catchup"]]
    assert (record["kind"], record["outcome"], record["files"], record["batches"]) == (
        "catch-up", "succeeded", CATCHUP_FILES, CATCHUP_FILES)
    assert record["rows"]["cloudtrail_events"] == CATCHUP_FILES * 3 and not record["rows"].get("cloudtrail_quarantine")
    # The runs the scheduler added meanwhile (the cron's on unpausing, the landing's) left the job to the driver.
    others = [r for r in first_run["catchup_runs"] if r["dag_run_id"] != first_run["catchup"]]
    assert all(r["state"] == "success" for r in others), others
    for other in others:
        tasks = setup.catchup_tasks(other["dag_run_id"])
        assert (tasks["plan"], tasks["spark_submit"][0]) == (("success", 1), "skipped"), tasks
        assert setup.xcom(other["dag_run_id"], "plan", "owned_by", dag_id=CATCHUP).startswith(
            f"{JOB} is owned by {DAG_ID}: its supervisor (pid ") or setup.xcom(
            other["dag_run_id"], "plan", "owned_by", dag_id=CATCHUP).startswith(f"{JOB} is owned by the continuous driver")


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
    # The Python driver holding the lease when the health was first healthy: the continuous one, or the catch-up run's
    # it waited for (the sensor reports a change of level, and healthy stayed healthy).
    assert health["driver"]["pid"] in (state["driver_pid"], first_run["holder"].pid)
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
    assert [e["kind"] for e in setup.events()] == ["start", "lease_wait", "lease_free", "restart"]
    [restart] = [e for e in setup.events() if e["kind"] == "restart"]
    assert (restart["restarts_in_window"], restart["consecutive_failures"]) == (1, 1)  # the first of the budget
    assert setup.webhook.kinds() == ["restart"]
    assert setup.webhook.posts[0]["dag_id"] == DAG_ID and setup.webhook.posts[0]["job"] == JOB
    assert setup.webhook.health_alerts() == []  # one restart is the supervisor's business, not an incident


def test_catchup_runs_leave_the_job_to_the_continuous_driver_and_none_fails_or_retries(setup, first_run):
    """Files landing while the continuous driver runs are its: the landing's watcher fires only for files no stream
    has taken yet, so it may start a catch-up run or not, and a catch-up run started meanwhile (by the watcher, the
    cron or a person) ends at once as a success that says who owns the job, without a spark-submit or a retry; the
    driver ingests the files. A catch-up run with a bad input fails, once, and its reason is on the job's record."""
    before = {r["dag_run_id"] for r in first_run["catchup_runs"]}  # the later ones too: the kill's landing's
    driver = live_driver(setup)
    setup.land("d")  # the catch-up DAG is unpaused since first_run: its watcher lists the landing every 2 s
    wait_for("batch d in cloudtrail_events", lambda: setup.event_ids() == sorted(setup.expected))
    # a run while the driver holds the job, as a person (or the cron) starts one: deterministic, unlike the watcher's
    manual = setup.api("POST", f"/dags/{CATCHUP}/dagRuns", {"logical_date": None, "conf": {}})
    bad = setup.api("POST", f"/dags/{CATCHUP}/dagRuns", {"logical_date": None, "conf": {"input": "/no/such/folder"}})
    runs = setup.settled_catchup_runs()
    setup.api("PATCH", f"/dags/{CATCHUP}", {"is_paused": True})

    landing = [r for r in runs if r["dag_run_id"] not in before and r["dag_run_id"] != bad["dag_run_id"]]
    assert landing and [r["state"] for r in landing] == ["success"] * len(landing), landing
    for run in landing:
        tasks = setup.catchup_tasks(run["dag_run_id"])
        assert (tasks["plan"], tasks["spark_submit"][0]) == (("success", 1), "skipped"), tasks
        owned = setup.xcom(run["dag_run_id"], "plan", "owned_by", dag_id=CATCHUP)
        assert owned.startswith(f"{JOB} is owned by "), owned
    # The run started while this driver ran: the driver named as the owner.
    assert manual["dag_run_id"] in [r["dag_run_id"] for r in landing], landing
    last = setup.xcom(manual["dag_run_id"], "plan", "owned_by", dag_id=CATCHUP)
    assert last.startswith(f"{JOB} is owned by the continuous driver pid {driver['driver_pid']} on host "), last
    assert last.endswith(f" of {DAG_ID}); its files are ingested there"), last
    assert setup.supervisor_state()["restarts_total"] == 1  # the kill -9's only: nothing fought over the lease
    assert [e["kind"] for e in setup.events()].count("lease_wait") == 1

    assert [r["state"] for r in runs if r["dag_run_id"] == bad["dag_run_id"]] == ["failed"]
    assert setup.catchup_tasks(bad["dag_run_id"])["plan"] == ("failed", 1)  # refused: no retry
    [record] = [r for r in read_runs(str(setup.control)) if r["run_id"] == bad["dag_run_id"]]
    assert (record["outcome"], record["try_number"]) == ("failed", 1)
    assert record["reason"].startswith("refused: input: "), record


def test_oncall_restart_clears_supervise_and_replaces_the_driver_in_the_same_run(setup, first_run):
    run_id = first_run["dag_run_id"]
    before = live_driver(setup)
    seen = len(setup.events())
    oncall = setup.oncall("restart")  # clears `supervise` through the REST API, waits for the new driver's lease

    assert oncall["state"] == "success"
    [audit] = [r for r in read_rows(Lake(setup.lake)) if r["action"] == "restart"]
    assert audit["outcome"] == "succeeded" and f"pid {before['driver_pid']} " in audit["message"]
    assert audit["triggered_by"] == "alice"
    # The task's log (INFO, as make airflow writes it) holds the plan and the result.
    assert f"doing restart of {JOB} (audit id {audit['audit_id']}), asked by alice" in oncall["log"]
    assert f"  1. clear the task `supervise` of run {run_id} of {DAG_ID}" in oncall["log"]
    assert f"result of restart of {JOB} (audit id {audit['audit_id']})" in oncall["log"]

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
    assert audit["triggered_by"] == "alice" and f"result of stop of {JOB}" in oncall["log"]
    stop = wait_for("the stop event", lambda: [e for e in setup.events()[started:] if e["kind"] == "stop"])[-1]
    assert stop["exit_code"] == 0, stop
    assert stop["outcome"].startswith("the driver stopped after its micro-batch"), stop
    assert not setup.drivers()
    # Both tasks end while the DAG is paused: the sensor ends from the triggerer (the scheduler would
    # never start it on a worker now).
    wait_for("both tasks to succeed", lambda: setup.task_states(run["dag_run_id"]),
             until={"supervise": "success", "checkpoint_health": "success"}.__eq__)
    assert setup.is_paused()
    assert setup.supervisor_state()["state"] == "stopped"
    assert setup.event_ids() == sorted(setup.expected)


def test_restart_storm_ends_in_one_alert_and_a_paused_dag(setup, first_run):
    alerts_before = list(setup.webhook.kinds())
    # A driver that always fails at start: its input folder does not exist.
    run = setup.api("POST", f"/dags/{DAG_ID}/dagRuns",
                    {"logical_date": None, "conf": {"input": str(setup.root / "no-such-folder")}})
    resumed = setup.oncall("resume_supervision")  # unpauses the DAG (it was stopped)
    assert resumed["state"] == "success"
    [audit] = [r for r in read_rows(Lake(setup.lake)) if r["action"] == "resume_supervision"]
    assert (audit["outcome"], audit["triggered_by"]) == ("succeeded", "alice")
    assert json.loads(audit["message"]) == {"lifted": None, "unpaused": DAG_ID}  # no hold: only the unpause
    assert f"result of resume_supervision of {JOB}" in resumed["log"]

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


def test_make_airflows_harness_made_the_connection_and_its_password_is_nowhere_else(setup, first_run):
    """The harness printed each person's login and named the service user without its password; the on-call actions
    above reached the REST API as that user; its password is in no component's output, task log or command line."""
    printed = setup.started.stdout
    assert f"  login:  admin / {setup.airflow.password('admin')}  (role admin)" in printed
    assert f"  login:  alice / {setup.airflow.password('alice')}  (role user)" in printed
    assert f"the connection airflow_api logs in as the service user {SERVICE_USER} (role user" in printed
    secret = setup.airflow.password(SERVICE_USER)
    assert secret and len(secret) >= 16
    assert [r["action"] for r in read_rows(Lake(setup.lake)) if r["outcome"] == "succeeded"] == [
        "restart", "stop", "resume_supervision"]
    assert secret not in setup.started.stdout + setup.started.stderr
    logged = [path for path in (setup.home / "logs").rglob("*") if path.is_file() and secret in path.read_text(
        errors="replace")]
    assert logged == []
    assert [pid for pid, command in marked_processes(str(setup.home)).items() if secret in command] == []


def test_the_health_page_tells_the_night_a_catchup_run_with_its_rows_a_restart_and_a_failed_run(setup, first_run):
    """In real headless Chromium, logged in as alice: the job's timeline lists the catch-up run with its row count,
    the kill -9's restart and the failed catch-up run with its reason, in that order."""
    from playwright.sync_api import sync_playwright

    from tests.helpers.chromium import CHROMIUM_ARGS, chromium, simple_login

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            simple_login(page, setup.airflow.url, "alice", setup.airflow.password("alice"))
            page.goto(f"{setup.airflow.url}/streaming-health/job/{JOB}")
            items = page.locator(f"section[data-job='{JOB}'] ol.timeline li")
            items.first.wait_for(timeout=60_000)
            page.screenshot(path=str(setup.root / "timeline.png"), full_page=True)
            shown = [(items.nth(i).get_attribute("data-kind"), items.nth(i).get_attribute("data-outcome"),
                      items.nth(i).get_attribute("data-rows"), items.nth(i).inner_text()) for i in range(items.count())]
            content = page.content()
        finally:
            browser.close()
    kinds = [(kind, outcome) for kind, outcome, _, _ in shown]
    loaded = next(i for i, (kind, outcome, _, text) in enumerate(shown)
                  if kind == "catch-up" and first_run["catchup"] in text)
    restart = next(i for i, (kind, _) in enumerate(kinds) if kind == "restart")  # the kill -9's
    failed = kinds.index(("catch-up", "failed"))
    assert loaded < restart < failed, kinds
    assert shown[loaded][2] == str(CATCHUP_FILES * 3)
    assert f"{CATCHUP_FILES * 3} rows into cloudtrail_events from {CATCHUP_FILES} files in {CATCHUP_FILES} " \
           "micro-batches" in shown[loaded][3]
    assert "catch-up failed" in shown[failed][3] and "refused: input: " in shown[failed][3]
    assert "(1/2 restarts in the window)" in shown[restart][3]
    assert setup.airflow.password(SERVICE_USER) not in content
