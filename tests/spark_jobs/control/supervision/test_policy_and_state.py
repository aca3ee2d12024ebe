"""The restart policy's arithmetic, and the supervisor's state file and event log (no processes)."""

from __future__ import annotations

import json
import os
from dataclasses import fields

import pytest

from spark_jobs.model.policies import RestartPolicy

from spark_jobs.registry import JOBS, get_job
from spark_jobs.control.supervision.policy import RestartBudget, backoff_seconds, healthy_long_enough
from spark_jobs.control.supervision.state import (SupervisorState, append_event, read_events, read_supervisor_state,
                                          write_supervisor_state)

POLICY = RestartPolicy(initial_backoff_seconds=5, multiplier=2, max_backoff_seconds=60, max_restarts=3,
                       window_seconds=100, healthy_reset_seconds=30)


@pytest.mark.parametrize("failures, wait", [(1, 0), (2, 5), (3, 10), (4, 20), (5, 40), (6, 60), (50, 60), (5000, 60)])
def test_a_first_failure_waits_nothing_then_the_backoff_doubles_from_the_initial_wait_up_to_the_cap(failures, wait):
    assert backoff_seconds(POLICY, failures) == wait


def test_budget_counts_restarts_in_a_sliding_window():
    budget = RestartBudget(POLICY, clock=lambda: 0.0)
    for at in (0.0, 10.0, 20.0):
        assert not budget.exhausted(at)
        budget.record(at)
    assert budget.exhausted(99.0) and budget.count(99.0) == 3
    assert budget.count(100.0) == 2 and not budget.exhausted(100.0)  # the restart at 0 left the window
    budget.clear()
    assert budget.count(100.0) == 0


def test_healthy_reset_needs_the_whole_period():
    assert not healthy_long_enough(POLICY, None)
    assert not healthy_long_enough(POLICY, 29.9)
    assert healthy_long_enough(POLICY, 30.0)


def test_every_job_declares_a_policy_and_continuous_jobs_a_processing_time_trigger():
    assert {f.name for f in fields(RestartPolicy)} >= {
        "initial_backoff_seconds", "multiplier", "max_backoff_seconds", "max_restarts", "window_seconds",
        "healthy_reset_seconds", "poll_seconds", "stop_grace_seconds", "stall_after_seconds"}
    assert get_job("cloudtrail_etl").continuous_trigger == "processing-time:10s"
    for job in JOBS.values():
        assert isinstance(job.restart, RestartPolicy)
        assert job.continuous_trigger is None or job.continuous_trigger.startswith("processing-time:")


@pytest.mark.parametrize("control", ["local", "memory://supervision-test/control/job"])
def test_state_file_and_event_log_round_trip(tmp_path, control):
    control = str(tmp_path / "control" / "job") if control == "local" else control
    assert read_supervisor_state(control) is None and read_events(control) == []
    state = SupervisorState(job="cloudtrail_etl", window_seconds=1800, max_restarts=5, state="backing_off",
                            consecutive_failures=2, is_backing_off=True, next_attempt_at="2026-01-01T00:00:10.000+00:00",
                            last_reason="the driver was killed by SIGKILL", last_exit_code=-9)
    written = write_supervisor_state(control, state)
    read = read_supervisor_state(control)
    assert read == written
    assert {k: read[k] for k in ("job", "state", "consecutive_failures", "is_backing_off", "next_attempt_at",
                                 "restarts_in_window", "window_seconds", "max_restarts", "last_reason",
                                 "last_exit_code", "driver_pid")} == {
        "job": "cloudtrail_etl", "state": "backing_off", "consecutive_failures": 2, "is_backing_off": True,
        "next_attempt_at": "2026-01-01T00:00:10.000+00:00", "restarts_in_window": 0, "window_seconds": 1800,
        "max_restarts": 5, "last_reason": "the driver was killed by SIGKILL", "last_exit_code": -9, "driver_pid": None}
    assert read["updated_at"].endswith("+00:00")
    append_event(control, {"kind": "restart", "reason": "r1", "outcome": "o1"})
    append_event(control, {"kind": "give_up", "reason": "r2", "outcome": "o2"})
    assert [(e["kind"], e["reason"], e["outcome"]) for e in read_events(control)] == [
        ("restart", "r1", "o1"), ("give_up", "r2", "o2")]
    assert all("time" in e for e in read_events(control))


def test_state_and_event_kinds_are_checked(tmp_path):
    with pytest.raises(ValueError, match="unknown supervisor state 'sleeping'"):
        write_supervisor_state(str(tmp_path), SupervisorState(job="j", window_seconds=1, max_restarts=1, state="sleeping"))
    with pytest.raises(ValueError, match="unknown event kind 'oops'"):
        append_event(str(tmp_path), {"kind": "oops"})
    assert not (tmp_path / "supervisor.json").exists()
    (tmp_path / "events.jsonl").write_text(json.dumps({"kind": "stop"}) + "\n{torn")
    assert read_events(str(tmp_path)) == [{"kind": "stop"}]


@pytest.mark.parametrize("details, kind", [
    ({"trigger": "processing-time:10s"}, "continuous"), ({"trigger": "available-now"}, "catch-up"),
    ({"holder": "streaming_oncall reset_checkpoint"}, "on-call"), ({}, "driver")])
def test_the_owner_of_a_lease_is_named_by_what_its_driver_runs(tmp_path, details, kind):
    import os
    import socket

    from spark_jobs.control.checkpoint.lease import Lease
    from spark_jobs.control.supervision.ownership import lease_owner

    lease = Lease.acquire(str(tmp_path), "cloudtrail_etl", 60, details=details)
    owner = lease_owner(lease.info)
    assert (owner.kind, owner.pid, owner.host, owner.since) == (kind, os.getpid(), socket.gethostname(),
                                                                lease.info.started_at)
    who = {"continuous": "the continuous driver", "catch-up": "the catch-up run", "on-call": "the on-call action",
           "driver": "a driver"}[kind]
    assert owner.describe() == f"{who} pid {os.getpid()} on host {socket.gethostname()} since {lease.info.started_at}"


def test_a_driver_started_by_an_airflow_task_is_named_by_its_run(tmp_path):
    import subprocess
    import sys

    from spark_jobs.control.checkpoint.lease import Lease
    from spark_jobs.control.supervision.ownership import airflow_context, lease_owner

    context = {"AIRFLOW_CTX_DAG_ID": "cloudtrail_etl_catchup", "AIRFLOW_CTX_DAG_RUN_ID": "asset_triggered__1",
               "AIRFLOW_CTX_TASK_ID": "spark_submit", "AIRFLOW_CTX_TRY_NUMBER": "1"}
    process = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                               env={**os.environ, **context}, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "up\n"  # running: its environment is in /proc (right at exec it is not)
        assert airflow_context(process.pid) == {"dag_id": "cloudtrail_etl_catchup", "run_id": "asset_triggered__1",
                                                "task_id": "spark_submit", "try_number": "1"}
        lease = Lease.acquire(str(tmp_path), "cloudtrail_etl", 60).info
        owner = lease_owner(type(lease)(**{**lease.to_dict(), "pid": process.pid, "pid_start": None}))
        assert owner.kind == "catch-up"  # no trigger in its lease: the DAG says it
        assert owner.describe().endswith(" (run asset_triggered__1 of cloudtrail_etl_catchup)")
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
    assert airflow_context(process.pid) == {}  # gone


def test_the_continuous_job_owns_the_checkpoint_while_its_driver_or_its_supervisor_is_live(tmp_path):
    import datetime as dt

    from spark_jobs.control.checkpoint.lease import Lease
    from spark_jobs.control.supervision.ownership import continuous_owner

    control = str(tmp_path)
    assert continuous_owner("cloudtrail_etl", control) is None  # nobody
    catchup = Lease.acquire(control, "cloudtrail_etl", 60, details={"trigger": "available-now"})
    assert continuous_owner("cloudtrail_etl", control) is None  # a catch-up run's lease is no reason to skip
    catchup.release()
    driver = Lease.acquire(control, "cloudtrail_etl", 60, details={"trigger": "processing-time:10s"})
    said = continuous_owner("cloudtrail_etl", control)
    assert said == (f"cloudtrail_etl is owned by the continuous driver pid {os.getpid()} on host "
                    f"{driver.info.host} since {driver.info.started_at}; its files are ingested there")
    driver.release()
    state = SupervisorState(job="cloudtrail_etl", window_seconds=1800, max_restarts=5, state="backing_off",
                            supervisor_pid=4242, started_at="2026-11-27T03:00:00.000+00:00")
    write_supervisor_state(control, state)
    assert continuous_owner("cloudtrail_etl", control) == (
        "cloudtrail_etl is owned by cloudtrail_etl_continuous: its supervisor (pid 4242, started "
        "2026-11-27T03:00:00.000+00:00) is backing off; its files are ingested there")
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5)
    assert continuous_owner("cloudtrail_etl", control, now=later) is None  # not refreshed for 5 min: gone
    for gone in ("stopped", "given_up"):
        write_supervisor_state(control, SupervisorState(job="cloudtrail_etl", window_seconds=1, max_restarts=1,
                                                        state=gone))
        assert continuous_owner("cloudtrail_etl", control) is None
