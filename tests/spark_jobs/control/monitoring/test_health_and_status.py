"""Job health, its alert conditions, incidents and ``python -m spark_jobs status`` on planted states.

Nothing runs Spark here: each state is planted (checkpoint files, the driver's lease naming this live
test process, the supervisor's state, progress rows written by the recorder's own code), as the
health checks read them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from spark_jobs.control.monitoring.conditions import Condition
from spark_jobs.control.monitoring.health import check_job
from spark_jobs.control.monitoring.incidents import CLEAR_CHECKS, IncidentStore
from spark_jobs.model.policies import AlertThresholds
from tests.helpers.project import run_cli
from tests.helpers.plant import JOB, PlantedLake


@pytest.fixture
def planted(tmp_path, monkeypatch) -> PlantedLake:
    lake = PlantedLake(tmp_path)
    monkeypatch.setenv(JOB.input_env_var, str(lake.landing))
    return lake


def health(planted: PlantedLake, job=JOB, **kwargs):
    return check_job(job, planted.lake, **kwargs)


def status_json(planted: PlantedLake) -> dict:
    done = run_cli("status", "--lake", str(planted.lake), "--json", env={JOB.input_env_var: str(planted.landing)})
    assert done.returncode == 0, done.stderr
    return {job["job"]: job for job in json.loads(done.stdout)["jobs"]}


def test_a_stalled_job_is_stalled_everywhere_with_what_to_do(planted):
    planted.stalled()

    found = health(planted)
    assert (found.state, found.checkpoint_status, found.backlog_files) == ("stalled", "stalled", 6)
    assert [c.code for c in found.conditions] == ["stalled"]
    [stalled] = found.conditions
    assert stalled.severity == "error"
    assert re.search(r"no batch committed for 120[0-9] s while 6 input file\(s\) wait \(limit 900 s", stalled.summary)
    assert "driver.log" in stalled.action
    assert found.last_commit_age_seconds == pytest.approx(1200, abs=30)

    terminal = run_cli("status", "--lake", str(planted.lake), env={JOB.input_env_var: str(planted.landing)})
    assert terminal.returncode == 0, terminal.stderr
    [row] = [line for line in terminal.stdout.splitlines() if line.startswith(JOB.name)]
    assert row.split()[:2] == [JOB.name, "stalled"]
    assert "20 min ago (batch 2)" in row and " 6 " in row and "1/5" in row
    assert "stalled [error]" in terminal.stdout and "do: " in terminal.stdout
    assert status_json(planted)[JOB.name]["state"] == "stalled"


def test_a_job_falling_behind_is_lagging(planted):
    planted.lagging()

    found = health(planted)
    assert (found.state, found.checkpoint_status, found.backlog_files) == ("lagging", "healthy", 40)
    [behind] = found.conditions
    assert behind.code == "falling_behind" and behind.severity == "warning"
    assert behind.summary == ("cloudtrail_etl is falling behind: its last 5 micro-batches processed 2.00 rows/s "
                              "while 6.50 rows/s arrived, and 40 input files wait (up from 18 5 batches ago)")
    assert found.last_batch["batch_id"] == 5
    job = status_json(planted)[JOB.name]
    assert (job["state"], job["backlog_files"], job["latest_commit_batch"]) == ("lagging", 40, 5)
    assert [c["code"] for c in job["conditions"]] == ["falling_behind"]


def test_a_healthy_job_raises_nothing(planted):
    planted.healthy()

    found = health(planted)
    assert (found.state, found.conditions, found.backlog_files) == ("healthy", [], 0)
    assert IncidentStore(planted.control).update(JOB.name, found.conditions) == []
    assert not (planted.control / "incidents.json").exists()


def test_one_slow_batch_is_not_falling_behind(planted):
    planted.commit_batches(6, files_per_batch=4, committed_ago=2)
    planted.new_files(10)
    planted.hold_lease(started_ago=60)
    planted.progress([(5.0, 2.0), (5.0, 2.0), (5.0, 9.0), (5.0, 2.0), (5.0, 2.0), (5.0, 2.0)])

    assert health(planted).conditions == []


def test_a_driver_working_off_its_backlog_is_not_falling_behind(planted):
    # A restarted driver catching up under a short processingTime trigger: every batch takes longer than the time
    # since the trigger before it started (Spark's processed < input rate), but the backlog shrinks.
    planted.commit_batches(6, files_per_batch=1, committed_ago=1)
    planted.new_files(2)
    planted.hold_lease(started_ago=20)
    slow = [(5.0, 2.0)] * 6
    planted.progress(slow, backlog=[8, 7, 6, 5, 4, 3])
    assert health(planted).conditions == []

    planted.progress(slow, first_batch=6, backlog=[3, 3, 3, 3, 3, 3])  # holding level: not growing either
    assert health(planted).conditions == []

    planted.progress(slow, first_batch=12, backlog=[3, 3, 3, 3, 4, 5])  # growing again: behind
    assert [c.code for c in health(planted).conditions] == ["falling_behind"]


def test_backlog_quarantine_and_restarts_over_their_bounds(planted):
    planted.commit_batches(2, files_per_batch=1, committed_ago=1)
    planted.new_files(3)
    planted.hold_lease()
    planted.supervisor(restarts_in_window=3, restarts_total=3, last_reason="the driver was killed by SIGKILL")
    planted.progress([(1.0, 5.0)] * 2, rows={"cloudtrail_events": 90, "cloudtrail_quarantine": 10})
    job = dataclasses.replace(JOB, alerts=AlertThresholds(max_backlog_files=2))

    found = health(planted, job=job)
    assert {c.code: c.severity for c in found.conditions} == {
        "backlog_high": "warning", "quarantine_high": "warning", "restarts_over_budget": "error"}
    by_code = {c.code: c for c in found.conditions}
    assert by_code["quarantine_high"].summary == ("20 of the 200 rows of cloudtrail_etl's last 2 micro-batches were "
                                                  "quarantined (10.0%, above 5.0%)")
    assert "FROM cloudtrail_quarantine GROUP BY reason" in by_code["quarantine_high"].action
    assert "restarted the driver 3 times within 1800 s (alert at 3, gives up after 5)" in \
        by_code["restarts_over_budget"].summary
    assert found.state == "lagging"  # the backlog is over its bound


def test_a_supervisor_that_gave_up_is_failed_and_a_gone_driver_dead(planted):
    planted.commit_batches(1, files_per_batch=1)
    planted.supervisor(state="given_up", restarts_in_window=5, last_reason="the driver exited with status 1")
    found = health(planted)
    assert (found.state, found.reason) == ("failed", "the supervisor gave up: the driver exited with status 1")
    assert [c.code for c in found.conditions] == ["restarts_over_budget"]
    assert found.conditions[0].action.endswith("then unpause cloudtrail_etl_continuous (it paused itself)")

    planted.supervisor(state="backing_off", is_backing_off=True, next_attempt_at="2026-11-23T10:00:04+00:00",
                       consecutive_failures=2, restarts_in_window=1)
    planted.hold_lease(pid=2 ** 22 + 17)  # no such process: a driver killed with kill -9
    gone = health(planted)
    assert gone.state == "dead"
    assert gone.backoff == "backing off until 2026-11-23T10:00:04+00:00 (2 consecutive failures)"


def test_a_lake_where_the_job_never_ran(planted):
    found = health(planted)
    assert (found.state, found.conditions, found.last_commit_time) == ("not_started", [], None)


def test_an_incident_alerts_once_when_it_opens_and_once_when_it_resolves(planted):
    planted.stalled()
    store = IncidentStore(planted.control)
    now = datetime.now(timezone.utc).replace(microsecond=0)

    opened = store.update(JOB.name, health(planted).conditions, now=now)
    assert [(a["kind"], a["code"]) for a in opened] == [("opened", "stalled")]
    for minute in range(1, 4):  # the same incident, checked again: no new alert
        assert store.update(JOB.name, health(planted).conditions, now=now + timedelta(minutes=minute)) == []
    assert [i["code"] for i in store.open_incidents()] == ["stalled"]
    assert IncidentStore(planted.control).update(JOB.name, health(planted).conditions) == []  # a new evaluator

    planted.catch_up()
    cleared = health(planted)
    assert (cleared.state, cleared.conditions) == ("healthy", [])
    assert store.update(JOB.name, cleared.conditions, now=now + timedelta(minutes=5)) == []  # one clean check
    resolved = store.update(JOB.name, cleared.conditions, now=now + timedelta(minutes=6), state=cleared.state)
    assert CLEAR_CHECKS == 2
    assert [(a["kind"], a["code"], a["action"]) for a in resolved] == [("resolved", "stalled", "nothing to do")]
    assert resolved[0]["summary"].startswith("resolved after 360 s: cloudtrail_etl is stalled")
    assert resolved[0]["summary"].endswith("; cloudtrail_etl is healthy now")
    assert store.update(JOB.name, cleared.conditions, now=now + timedelta(minutes=7)) == []
    assert store.open_incidents() == []
    assert [a["kind"] for a in store.pending()] == ["opened", "resolved"]  # nobody delivered them here
    store.mark_delivered(a["alert_id"] for a in store.pending())
    assert store.pending() == []


def test_a_lake_on_another_filesystem_is_reported_but_keeps_no_incidents():
    found = check_job(JOB, "memory://monitoring-lake")
    assert (found.state, found.checkpoint_status) == ("not_started", "not_started")
    store = IncidentStore(found.report["control"])
    stalled = [Condition("stalled", "error", "cloudtrail_etl is stalled", "look at the driver")]
    assert store.update(JOB.name, stalled) == [] and store.pending() == [] and store.open_incidents() == []


def test_status_in_words_names_the_driver_its_host_and_uptime_and_what_the_supervisor_does(planted):
    import os
    import socket

    planted.healthy()  # a continuous driver (this process) up for 60 s
    planted.supervisor(restarts_in_window=1, restarts_total=1, consecutive_failures=1,
                       last_reason="the driver was killed by SIGKILL")
    found = health(planted)
    assert found.state == "healthy"
    assert found.supervision == "running; 1 restart in the last 30 min (last: the driver was killed by SIGKILL)"
    assert found.backoff is None  # not "not backing off (1 consecutive failures)" beside "healthy"
    assert re.fullmatch(rf"the continuous driver pid {os.getpid()} on host {re.escape(socket.gethostname())} since "
                        r"\S+, up [56]\d s", found.owner), found.owner

    terminal = run_cli("status", "--lake", str(planted.lake), env={JOB.input_env_var: str(planted.landing)})
    [row] = [line for line in terminal.stdout.splitlines() if line.startswith(JOB.name)]
    assert re.search(rf"pid {os.getpid()} on {re.escape(socket.gethostname())}, up [56]\d s \(continuous\)", row), row
    assert row.endswith("running; 1 restart in the last 30 min (last: the driver was killed by SIGKILL)")
    assert f"  owner: the continuous driver pid {os.getpid()} on host " in terminal.stdout


def test_a_catchup_run_holding_the_checkpoint_is_named_while_the_supervisor_waits_for_it(planted):
    import os

    planted.commit_batches(2, files_per_batch=1, committed_ago=1)
    planted.hold_lease(started_ago=30, trigger="available-now")
    planted.supervisor(state="waiting_for_lease", driver_pid=None, waiting_since="2026-11-27T03:00:00.000+00:00",
                       waiting_for=f"the catch-up run pid {os.getpid()} on host h since 2026-11-27T02:59:58Z")
    found = health(planted)
    assert found.state == "healthy" and found.owner.startswith(f"the catch-up run pid {os.getpid()} on host ")
    assert found.supervision == (
        "waiting since 2026-11-27T03:00:00.000+00:00 for the lease held by the catch-up run pid "
        f"{os.getpid()} on host h since 2026-11-27T02:59:58Z (not a failure: it starts the driver when that run "
        "lets go)")
    job = status_json(planted)[JOB.name]
    assert job["owner"] == found.owner.replace(found.owner.rsplit(", up ", 1)[1], job["owner"].rsplit(", up ", 1)[1])
    assert job["supervisor"]["state"] == "waiting_for_lease"


def test_the_plots_show_the_current_checkpoint_only_after_a_reset(planted):
    """A reset checkpoint is a new query whose batch ids start at 0 again: its batches are plotted, the old ones are
    left out and counted, so no axis holds two batch 0s."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from spark_jobs.control.monitoring.history import read_progress
    from spark_jobs.control.monitoring.plots import current_generation, job_charts
    from spark_jobs.control.monitoring.progress import SCHEMA, progress_table_path

    old = planted.progress([(1.0, 2.0)] * 3, seconds_apart=100)  # batches 0-2 of the old checkpoint
    new = [{**row, "query_id": "after-the-reset", "timestamp": row["timestamp"] + timedelta(minutes=10)}
           for row in old[:2]]  # batches 0-1 of the new one
    write_deltalake(str(progress_table_path(planted.lake)), pa.Table.from_pylist(new, schema=SCHEMA), mode="append",
                    partition_by=["date"])
    rows = read_progress(planted.lake, JOB.name)
    assert [(r["query_id"][:5], r["batch_id"]) for r in rows] == [
        ("5c1f0", 0), ("5c1f0", 1), ("5c1f0", 2), ("after", 0), ("after", 1)]
    shown, earlier = current_generation(rows)
    assert ([r["batch_id"] for r in shown], earlier) == ([0, 1], 3)
    [rates] = [c for c in job_charts(shown, ["cloudtrail_events"]) if c.key == "rates"]
    assert [batch for batch, _ in rates.series[0].points] == [0, 1]
