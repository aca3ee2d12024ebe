"""Rollout steps carried out by a real Supervisor on stand-in drivers (``lease_holder.py``, no Spark; the same with
real drivers and real code changes: tests/spark_jobs/supervision/test_rollout.py):

- a destructive rollout: the driver stopped after its micro-batch, the checkpoint and tables moved aside under the
  lease, the new version started from its release on a new checkpoint, none of the restart budget used;
- a new version that crashes the moment it takes the lease at the handover, before the supervisor sees it hold it:
  rolled back, not a failed handover.
"""

from __future__ import annotations

import os
import threading

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.control.rollout.destructive import ask_for_destructive_rollout
from spark_jobs.control.rollout.preflight_state import write_preflight
from spark_jobs.control.rollout.request import job_version, read_rollout, request_rollout
from spark_jobs.control.supervision.state import read_events, read_supervisor_state
from spark_jobs.control.supervision.supervisor import Supervisor
from spark_jobs.launch.releases import RELEASES_ENV, add_release
from spark_jobs.model.lake import Lake
from spark_jobs.model.policies import RestartPolicy
from spark_jobs.registry import get_job
from tests.helpers.processes import (assert_no_process_left, lease_holder, remember_processes_before_the_test,
                                     wait_for)
from tests.helpers.project import PROJECT_ROOT

JOB = get_job("cloudtrail_etl")
FAST = RestartPolicy(initial_backoff_seconds=0.1, max_restarts=3, window_seconds=600, poll_seconds=0.1,
                     stop_grace_seconds=10)


def _supervising(tmp_path, monkeypatch, **env) -> tuple[Lake, Supervisor, threading.Event, threading.Thread, dict]:
    """Releases v3 and v4 (this checkout's code) and a supervisor (its thread not started) of a stand-in driver with
    ``env``."""
    remember_processes_before_the_test()
    monkeypatch.setenv(RELEASES_ENV, str(tmp_path / "releases"))
    for name in ("v3", "v4"):
        add_release(name, package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path / "releases")
    lake = Lake(tmp_path / "lake")
    stop = threading.Event()
    supervisor = Supervisor(JOB, lake, lease_holder(lake.control_path(JOB.name), hold_seconds=-1, exit_code=0, ttl=2),
                            FAST, should_stop=stop.is_set, input_path=str(tmp_path), env={**os.environ, **env})
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(outcome=supervisor.run()), daemon=True)
    return lake, supervisor, stop, thread, result


def _first_driver(control):
    return wait_for(lambda: (lease := read_lease(str(control))) and not lease.released
                    and read_supervisor_state(str(control))["state"] == "running" and lease, 60, "the first driver running")


def test_a_version_that_crashes_the_moment_it_takes_the_lease_at_the_handover_is_rolled_back(tmp_path, monkeypatch):
    lake, supervisor, stop, thread, result = _supervising(tmp_path, monkeypatch, LEASE_HOLDER_CRASH_VERSION="v4")
    control = lake.control_path(JOB.name)
    thread.start()
    try:
        first = _first_driver(control)
        asked = request_rollout(str(control), JOB.name, "v4", first.details["version"], "alice", "a bug")
        ended = wait_for(lambda: (found := read_rollout(str(control))) and found["phase"] not in (
            "requested", "preflight", "handover", "probation") and found, 60, "the rollout's end")
        again = wait_for(lambda: (lease := read_lease(str(control))) and not lease.released
                         and lease.pid not in (first.pid,) and lease.details.get("version") == first.details["version"]
                         and lease, 60, "the checkout's code running again")

        assert [h["phase"] for h in ended["history"]] == ["requested", "preflight", "handover", "probation",
                                                          "rolled_back"], ended
        assert ended["id"] == asked["id"] and ended["outcome"].startswith(
            "version v4 failed on probation: the driver exited with status 1: error: version v4 crashes in its first "
            "batch; ")
        # generations: the first driver's, v4's (taken, then gone with it), the checkout's code again
        assert again.generation == first.generation + 2
        kinds = [e["kind"] for e in read_events(str(control)) if e["kind"] != "standby"]
        assert kinds == ["start", "rollout", "handover", "rollback"], kinds
        assert job_version(str(control)) is None
        assert read_supervisor_state(str(control))["restarts_total"] == 0
    finally:
        stop.set()
        thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert_no_process_left()


def test_a_destructive_rollout_stops_moves_the_checkpoint_and_tables_aside_and_starts_the_version_new(
        tmp_path, monkeypatch):
    lake, supervisor, stop, thread, result = _supervising(tmp_path, monkeypatch, LEASE_HOLDER_COMMITTED="1")
    control = lake.control_path(JOB.name)
    checkpoint = lake.checkpoint_path(JOB.name)
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text("v1")
    write_deltalake(str(lake.table_path("cloudtrail_events")), pa.table({"eventID": ["a", "b"]}))
    thread.start()
    try:
        first = _first_driver(control)
        assert first.details["version"].startswith("code-")  # the checkout's code
        write_preflight(str(control), "v3", "c0de", [{"code": "output_schema_changed", "explanation": "a column type",
                                                      "action": "a destructive rollout"}], ["outputs"], 1.0)
        asked = ask_for_destructive_rollout(JOB, lake, "v3", "alice", "a column type")
        done = wait_for(lambda: (found := read_rollout(str(control))) and found["phase"] in ("done", "failed")
                        and found, 60, "the destructive rollout's end")

        assert [h["phase"] for h in done["history"]] == ["requested", "resetting", "rebuilding", "done"], done
        backup = control / "backups" / f"rollout-{asked['id']}"
        assert done["backup"] == str(backup)
        assert done["moved"] == [{"from": str(checkpoint), "to": str(backup / "checkpoint")},
                                 {"from": str(lake.table_path("cloudtrail_events")),
                                  "to": str(backup / "tables" / "cloudtrail_events")}]
        assert (backup / "checkpoint" / "commits" / "0").read_text() == "v1"
        kept = DeltaTable(str(backup / "tables" / "cloudtrail_events")).to_pyarrow_table()
        assert sorted(kept.column("eventID").to_pylist()) == ["a", "b"]
        assert not checkpoint.exists() and not lake.table_path("cloudtrail_events").exists()
        now = read_lease(str(control))
        # generations: the old driver's, the move's (the reset held the lease), the new version's
        assert (now.generation, now.released, now.details["version"]) == (first.generation + 2, False, "v3")
        assert now.pid != first.pid and not os.path.exists(f"/proc/{first.pid}")
        assert job_version(str(control)) == "v3"
        events = [e for e in read_events(str(control)) if e["kind"] != "standby"]
        assert [e["kind"] for e in events] == ["start", "rollout", "rollout_reset", "rollout_done"]
        assert events[2]["outcome"] == (f"the checkpoint and the tables were moved to {backup}; version v3 starts on a "
                                        "new checkpoint and rebuilds every table from the input (not a restart: none "
                                        "of the budget)")
        state = read_supervisor_state(str(control))
        assert (state["restarts_total"], state["state"]) == (0, "running")
    finally:
        stop.set()
        thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert_no_process_left()


def test_a_supervisor_that_starts_after_the_stop_of_a_destructive_rollout_carries_the_move_on(tmp_path, monkeypatch):
    from spark_jobs.control.checkpoint.lease import Lease
    from spark_jobs.control.rollout.request import update_rollout

    lake, supervisor, stop, thread, result = _supervising(tmp_path, monkeypatch, LEASE_HOLDER_COMMITTED="1")
    control = lake.control_path(JOB.name)
    checkpoint = lake.checkpoint_path(JOB.name)
    (checkpoint / "commits").mkdir(parents=True)
    Lease.acquire(str(control), JOB.name, 2, details={"trigger": "processing-time:1s"}).release()  # stopped
    asked = request_rollout(str(control), JOB.name, "v3", None, "alice", "a column type", destructive=True)
    update_rollout(str(control), asked, "resetting")  # the supervisor was killed here, before the move
    thread.start()
    try:
        done = wait_for(lambda: (found := read_rollout(str(control))) and found["phase"] in ("done", "failed")
                        and found, 60, "the destructive rollout's end")
        assert [h["phase"] for h in done["history"]] == ["requested", "resetting", "rebuilding", "done"], done
        backup = control / "backups" / f"rollout-{asked['id']}"
        assert (backup / "checkpoint" / "commits").is_dir() and not checkpoint.exists()
        assert read_lease(str(control)).details["version"] == "v3"
        kinds = [e["kind"] for e in read_events(str(control)) if e["kind"] != "standby"]
        assert kinds == ["rollout_reset", "start", "rollout_done"], kinds
    finally:
        stop.set()
        thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert_no_process_left()
