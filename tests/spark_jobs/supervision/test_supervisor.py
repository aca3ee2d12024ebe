"""The Supervisor's loop on small real processes (no Spark): give-up, stop, stall, healthy reset, no orphans.

The drivers here are ``python -c`` commands and ``lease_holder.py``, a stand-in that holds the real
single-writer lease like the runner does; the same behaviours with real Spark drivers are in
test_supervised_spark.py.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.control.rollout.request import ACTIVE, job_version, read_rollout, request_rollout
from spark_jobs.control.supervision.standby_state import read_standby
from spark_jobs.model.lake import Lake
from spark_jobs.model.policies import RestartPolicy
from spark_jobs.registry import get_job
from spark_jobs.control.supervision.state import read_events, read_supervisor_state
from spark_jobs.control.supervision.supervisor import Supervisor
from spark_jobs.launch.releases import RELEASES_ENV
from tests.helpers.processes import assert_no_process_left, lease_holder, wait_for
from tools.releases import COMPATIBLE, release_with

# JVM-free (its drivers are stand-ins), yet out of the fast tier (tests/helpers/tiers.py): its supervisors wait out real
# backoffs, lease expiries and healthy runs, tens of seconds, until the supervisor takes a clock.
NOT_IN_THE_FAST_TIER = "waits out real backoffs, lease expiries and healthy runs"
JOB = get_job("cloudtrail_etl")
FAST = RestartPolicy(initial_backoff_seconds=0.1, multiplier=2, max_backoff_seconds=1, max_restarts=3,
                     window_seconds=600, healthy_reset_seconds=600, poll_seconds=0.1, stop_grace_seconds=10)
FAILS_AT_START = [sys.executable, "-c",
                  "import sys; print('error: input folder /no/such does not exist', file=sys.stderr); sys.exit(1)"]


class Recorder:
    """The notify and on_state callbacks, remembered."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.states: list[dict] = []

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events]


def _supervisor(tmp_path, command, policy=FAST, stop: threading.Event | None = None) -> tuple[Supervisor, Recorder]:
    seen = Recorder()
    supervisor = Supervisor(JOB, Lake(tmp_path / "lake"), command, policy, notify=seen.events.append,
                            should_stop=(stop or threading.Event()).is_set, on_state=seen.states.append,
                            input_path=str(tmp_path))
    return supervisor, seen


def _in_thread(supervisor: Supervisor) -> tuple[threading.Thread, dict]:
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(outcome=supervisor.run()), daemon=True)
    thread.start()
    return thread, result


def test_restart_storm_is_capped_by_the_budget_and_ends_in_one_give_up(tmp_path):
    supervisor, seen = _supervisor(tmp_path, FAILS_AT_START)
    assert supervisor.run() == "given_up"

    assert seen.kinds() == ["start", "restart", "restart", "restart", "give_up"]
    restarts, [give_up] = seen.events[1:4], seen.events[4:]
    assert [e["backoff_seconds"] for e in restarts] == [0, 0.1, 0.2]
    assert [e["consecutive_failures"] for e in restarts] == [1, 2, 3]
    assert all(e["reason"] == "the driver exited with status 1: error: input folder /no/such does not exist"
               for e in seen.events[1:])
    assert give_up["outcome"] == "not restarted: 3 restarts within 600 s already (budget 3)"
    assert "fix the cause" in give_up["action"] and "python -m spark_jobs supervise cloudtrail_etl" in give_up["action"]
    assert "error: input folder /no/such does not exist" in give_up["log_tail"]

    control = str(Lake(tmp_path / "lake").control_path(JOB.name))
    assert [e["kind"] for e in read_events(control)] == seen.kinds()
    state = read_supervisor_state(control)
    assert (state["state"], state["consecutive_failures"], state["restarts_in_window"], state["last_exit_code"],
            state["is_backing_off"], state["driver_pid"]) == ("given_up", 4, 3, 1, False, None)
    assert state == seen.states[-1]
    assert [s["state"] for s in seen.states].count("backing_off") == 3
    assert_no_process_left()


def test_stop_while_backing_off_ends_at_once_without_a_driver(tmp_path):
    stop = threading.Event()
    supervisor, seen = _supervisor(tmp_path, FAILS_AT_START, replace(FAST, initial_backoff_seconds=600, max_backoff_seconds=600), stop)
    thread, result = _in_thread(supervisor)
    wait_for(lambda: seen.kinds().count("restart") == 2, 60, "the second restart (the first has no backoff)")
    assert read_supervisor_state(supervisor.control)["is_backing_off"] is True
    stop.set()
    thread.join(timeout=30)
    assert result == {"outcome": "stopped"}
    assert seen.kinds() == ["start", "restart", "restart", "stop"]
    assert [e["backoff_seconds"] for e in seen.events[1:3]] == [0, 600]
    assert seen.events[-1]["reason"] == "asked to stop while backing off"
    assert read_supervisor_state(supervisor.control)["state"] == "stopped"
    assert_no_process_left()


def _supervising_a_lease_holder(tmp_path):
    """A supervisor (in a thread) of a stand-in driver that holds the lease (ttl 2 s) until SIGTERM, once it runs."""
    control = Lake(tmp_path / "lake").control_path(JOB.name)
    stop = threading.Event()
    supervisor, seen = _supervisor(tmp_path, lease_holder(control, hold_seconds=-1, exit_code=0, ttl=2), stop=stop)
    thread, result = _in_thread(supervisor)
    first = wait_for(lambda: seen.states and seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"],
                     60, "the first driver running")
    return control, stop, supervisor, seen, thread, result, first


def test_a_sigstopped_driver_is_stalled_killed_and_replaced_then_stopped_gracefully(tmp_path):
    control, stop, supervisor, seen, thread, result, first = _supervising_a_lease_holder(tmp_path)
    os.kill(first, signal.SIGSTOP)
    second = wait_for(lambda: seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"] != first
                      and seen.states[-1]["driver_pid"], 60, "a second driver running")
    assert not os.path.exists(f"/proc/{first}")  # the stopped driver was killed and reaped

    [restart] = [e for e in seen.events if e["kind"] == "restart"]
    assert restart["reason"].startswith(f"stalled: the driver (pid {first}) has not renewed its lease for ")
    assert restart["reason"].endswith("(limit 2 s): it is paused (SIGSTOP) or hung")
    assert restart["exit_code"] == -signal.SIGKILL

    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert seen.kinds() == ["start", "restart", "stop"]
    assert seen.events[-1]["outcome"].startswith("the driver stopped after its micro-batch in ")
    assert seen.events[-1]["exit_code"] == 0
    assert "stopped by SIGTERM" in supervisor.driver.log_tail()
    assert second != first
    assert_no_process_left(first, second)


def test_a_long_healthy_run_resets_the_consecutive_failures_and_the_budget(tmp_path):
    control = Lake(tmp_path / "lake").control_path(JOB.name)
    policy = replace(FAST, max_restarts=2, healthy_reset_seconds=1.0)
    stop = threading.Event()
    # Each driver is healthy for 2 s (longer than the reset period), then fails.
    supervisor, seen = _supervisor(tmp_path, lease_holder(control, hold_seconds=2.5, exit_code=1), policy, stop)
    thread, result = _in_thread(supervisor)
    wait_for(lambda: seen.kinds().count("restart") >= 4, 120, "four restarts")
    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert "give_up" not in seen.kinds()  # 4 failures, a budget of 2: the resets kept it going
    restarts = [e for e in seen.events if e["kind"] == "restart"]
    assert {e["consecutive_failures"] for e in restarts} == {1}
    assert {e["reason"] for e in restarts} == {"the driver exited with status 1: error: stand-in driver failing with status 1"}
    assert_no_process_left()

    # The same drivers without the reset: the budget of 2 gives up at the third failure.
    supervisor, seen = _supervisor(tmp_path, lease_holder(control, hold_seconds=2.5, exit_code=1),
                                   replace(policy, healthy_reset_seconds=600))
    assert supervisor.run() == "given_up"
    assert seen.kinds() == ["start", "restart", "restart", "give_up"]


class HoldReads:
    """Counts the supervisor's reads of the hold: while supervision is paused it reads it once a poll, both
    waiting with no driver and watching a driver it found stalled (only then), so a count that grows says the
    loop went round again, leaving everything as it was, without sleeping for it."""

    def __init__(self, monkeypatch) -> None:
        import spark_jobs.control.supervision.supervisor as supervisor_module

        self.count = 0
        real = supervisor_module.read_hold

        def counted(control: str):
            self.count += 1
            return real(control)

        monkeypatch.setattr(supervisor_module, "read_hold", counted)

    def wait_rounds(self, rounds: int, what: str) -> None:
        start = self.count
        wait_for(lambda: self.count >= start + rounds, 60, what)


def test_paused_supervision_neither_kills_a_stalled_driver_nor_restarts_an_ended_one_until_resumed(
        tmp_path, monkeypatch, caplog):
    from spark_jobs.control.supervision.hold import lift_hold, place_hold

    reads = HoldReads(monkeypatch)
    caplog.set_level(logging.WARNING, logger="spark_jobs.control.supervision")
    control, stop, supervisor, seen, thread, result, first = _supervising_a_lease_holder(tmp_path)
    place_hold(str(control), "alice", "taking a thread dump")
    os.kill(first, signal.SIGSTOP)
    # Once the lease is older than its ttl the supervisor finds the driver stalled, and spares it, poll after poll.
    wait_for(lambda: "not killed: supervision is paused" in caplog.text, 60, "the stall to be seen and spared")
    assert f"stalled: the driver (pid {first}) has not renewed its lease for " in caplog.text
    reads.wait_rounds(3, "three more polls of the stalled driver while held")
    assert os.path.exists(f"/proc/{first}") and seen.kinds() == ["start"]
    os.kill(first, signal.SIGCONT)
    os.kill(first, signal.SIGKILL)  # the on-call ends it by hand: not restarted while held
    held = wait_for(lambda: [e for e in seen.events if e["kind"] == "held"], 60, "the held event")[0]
    reads.wait_rounds(3, "three polls of the hold with no driver")
    state = read_supervisor_state(supervisor.control)
    assert (state["state"], state["restarts_total"], state["consecutive_failures"], state["driver_pid"]) == (
        "held", 0, 0, None)
    assert held["reason"] == "the driver was killed by SIGKILL"
    assert held["outcome"] == ("not restarted: supervision is paused by alice: taking a thread dump; resume "
                               "supervision to start the driver again")
    assert seen.kinds() == ["start", "held"]

    lift_hold(str(control))
    second = wait_for(lambda: seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"] != first
                      and seen.states[-1]["driver_pid"], 60, "a driver after resuming")
    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert seen.kinds() == ["start", "held", "resume", "stop"]
    assert read_supervisor_state(supervisor.control)["restarts_total"] == 0  # a hold uses none of the budget
    assert_no_process_left(first, second)


CHILD_OF_A_SUPERVISOR = """
import sys, time
from pathlib import Path
from spark_jobs.control.supervision.child import ChildProcess
driver = ChildProcess([sys.executable, "-c", "import time; time.sleep(600)"], Path(sys.argv[1]))
print(driver.start(), flush=True)
time.sleep(600)
"""


def test_the_driver_dies_with_its_supervisor_even_after_kill_9(tmp_path):
    supervising = subprocess.Popen([sys.executable, "-c", CHILD_OF_A_SUPERVISOR, str(tmp_path / "driver.log")],
                                   stdout=subprocess.PIPE, text=True)
    driver_pid = int(supervising.stdout.readline())
    assert os.path.exists(f"/proc/{driver_pid}")
    supervising.kill()  # SIGKILL: the supervisor cleans nothing up itself
    supervising.wait()
    supervising.stdout.close()
    wait_for(lambda: not os.path.exists(f"/proc/{driver_pid}")
             or open(f"/proc/{driver_pid}/stat").read().split(") ")[1][0] == "Z", 30,
             "the orphaned driver to get its parent-death SIGTERM")
    assert_no_process_left(driver_pid)


def _catchup_run(control, hold_seconds: float) -> subprocess.Popen:
    """A stand-in catch-up run (available-now) that holds the job's lease for ``hold_seconds``, once it holds it."""
    process = subprocess.Popen(lease_holder(control, hold_seconds, exit_code=0, ttl=2, trigger="available-now"),
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().startswith("holding lease generation ")
    return process


def test_a_lease_held_by_a_catchup_run_is_waited_for_not_counted_and_a_crash_after_it_keeps_the_budget(tmp_path):
    control = Lake(tmp_path / "lake").control_path(JOB.name)
    catchup = _catchup_run(control, hold_seconds=3)
    stop = threading.Event()
    supervisor, seen = _supervisor(tmp_path, lease_holder(control, hold_seconds=-1, exit_code=0, ttl=2), stop=stop)
    thread, result = _in_thread(supervisor)

    waiting = wait_for(lambda: [s for s in seen.states if s["state"] == "waiting_for_lease"], 30, "the wait")[0]
    assert waiting["waiting_for"].startswith(f"the catch-up run pid {catchup.pid} on host ")
    assert waiting["driver_pid"] is None  # no driver was started into the held lease
    first = wait_for(lambda: seen.states and seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"],
                     60, "the driver once the catch-up run let go")
    assert catchup.wait(timeout=30) == 0
    catchup.stdout.close()
    wait_event, free_event = seen.events[1:3]
    assert (wait_event["kind"], free_event["kind"]) == ("lease_wait", "lease_free")
    assert wait_event["holder"]["pid"] == catchup.pid and wait_event["holder"]["kind"] == "catch-up"
    assert wait_event["outcome"].endswith("(not a failure: no restart is counted)")
    state = read_supervisor_state(supervisor.control)
    assert (state["restarts_in_window"], state["restarts_total"], state["consecutive_failures"], state["lease_waits"],
            state["waiting_for"]) == (0, 0, 0, 1, None)

    os.kill(first, signal.SIGKILL)  # a real crash after the wait: restarted, the first of the whole budget
    second = wait_for(lambda: seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"] != first
                      and seen.states[-1]["driver_pid"], 60, "the restarted driver")
    [restart] = [e for e in seen.events if e["kind"] == "restart"]
    assert (restart["consecutive_failures"], restart["restarts_in_window"], restart["backoff_seconds"]) == (1, 1, 0)
    assert restart["outcome"].startswith("restarting from the same checkpoint in 0 s (restart 1 of 3 allowed")
    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert seen.kinds() == ["start", "lease_wait", "lease_free", "restart", "stop"]
    assert_no_process_left(first, second)


def test_a_driver_refused_by_the_lease_exit_3_waits_for_it_and_uses_none_of_the_budget(tmp_path, monkeypatch):
    """The race: the holder takes the lease between the supervisor's look and its driver's start; the driver exits 3
    (LeaseHeld), and the supervisor waits for the holder instead of counting a failure."""
    control = Lake(tmp_path / "lake").control_path(JOB.name)
    catchup = _catchup_run(control, hold_seconds=3)
    looks = []
    real = Supervisor._other_holder

    def blind_first_look(self):  # the first look happened just before the catch-up run took the lease
        looks.append(1)
        return None if len(looks) == 1 else real(self)

    monkeypatch.setattr(Supervisor, "_other_holder", blind_first_look)
    stop = threading.Event()
    supervisor, seen = _supervisor(tmp_path, lease_holder(control, hold_seconds=-1, exit_code=0, ttl=2), stop=stop)
    thread, result = _in_thread(supervisor)
    driver = wait_for(lambda: seen.states and seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"],
                      60, "the driver once the catch-up run let go")
    assert catchup.wait(timeout=30) == 0
    catchup.stdout.close()
    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert seen.kinds() == ["start", "lease_wait", "lease_free", "stop"]
    refused = seen.events[1]["reason"]
    assert refused.startswith("the driver exited with status 3: error: job cloudtrail_etl is already running: its "
                              f"checkpoint is held by pid {catchup.pid} ")
    assert f"; the checkpoint's lease is held by the catch-up run pid {catchup.pid} on host " in refused
    state = read_supervisor_state(supervisor.control)
    assert (state["restarts_total"], state["consecutive_failures"], state["attempt"]) == (0, 0, 2)
    assert_no_process_left(driver)


def test_a_warm_standby_replaced_when_it_dies_takes_over_a_killed_driver_without_backoff(tmp_path):
    control = Lake(tmp_path / "lake").control_path(JOB.name)
    stop = threading.Event()
    policy = replace(FAST, warm_standby=True, initial_backoff_seconds=600, max_backoff_seconds=600)
    supervisor, seen = _supervisor(tmp_path, lease_holder(control, hold_seconds=-1, exit_code=0, ttl=2), policy, stop)
    supervisor.standby_after_seconds = 0
    thread, result = _in_thread(supervisor)

    def warm_standby(not_pid=None):
        said = read_standby(str(control))
        return said and said["pid"] != not_pid and said["pid"] == supervisor.state.standby_pid and said["pid"]

    first_standby = wait_for(warm_standby, 60, "a warm standby")
    driver = supervisor.state.driver_pid
    os.kill(first_standby, signal.SIGKILL)  # a standby that dies while it waits: replaced, not a restart
    second_standby = wait_for(lambda: warm_standby(not_pid=first_standby), 60, "the standby's replacement")
    assert (supervisor.state.driver_pid, supervisor.state.restarts_total) == (driver, 0)
    standby_events = [e for e in seen.events if e["kind"] == "standby"]
    assert [e["outcome"].split()[0] for e in standby_events] == ["started", "replaced", "started"]
    replaced = standby_events[1]
    assert replaced["reason"] == f"the warm standby (pid {first_standby}) was killed by SIGKILL while it waited"
    assert replaced["outcome"] == ("replaced in 0 s; the driver runs on (a standby is not the job's driver: not a "
                                   "restart, none of the budget)")

    os.kill(driver, signal.SIGKILL)  # the driver dies: the standby takes the lease, the supervisor adopts it
    wait_for(lambda: seen.states[-1]["state"] == "running" and seen.states[-1]["driver_pid"] == second_standby, 30,
             "the standby running the job")
    third_standby = wait_for(lambda: warm_standby(not_pid=second_standby), 60, "a new standby beside it")
    lease = read_lease(str(control))
    assert (lease.pid, lease.released) == (second_standby, False)
    [take_over] = [e for e in seen.events if e["kind"] == "restart"]
    assert take_over["reason"] == "the driver was killed by SIGKILL"
    assert (take_over["take_over"], take_over["backoff_seconds"], take_over["standby_pid"],
            take_over["consecutive_failures"], take_over["restarts_in_window"]) == (True, 0, second_standby, 1, 1)
    assert take_over["outcome"].startswith(f"taken over by the warm standby (pid {second_standby}), which holds the "
                                           "lease: it runs from the same checkpoint, no backoff (restart 1 of 3")

    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert seen.kinds() == ["start", "standby", "standby", "standby", "restart", "standby", "stop"]
    assert read_lease(str(control)).released and read_standby(str(control)) is None
    state = read_supervisor_state(supervisor.control)
    assert (state["state"], state["restarts_total"], state["standby_pid"]) == ("stopped", 1, None)
    assert_no_process_left(driver, first_standby, second_standby, third_standby)


def test_a_driver_killed_during_a_rollouts_preflight_is_handed_over_to_the_new_version(tmp_path, monkeypatch):
    # The new version's standby takes a free lease by itself once its pre-flight passed and it is warm: the driver's
    # end during the pre-flight is the handover come early, not a take-over of the old version by the new code (which
    # left the rollout `failed` while version v2 ran as the driver, and the old version set to start after it).
    monkeypatch.setenv(RELEASES_ENV, str(tmp_path / "releases"))
    monkeypatch.setenv("LEASE_HOLDER_PREFLIGHT_SECONDS", "3")
    release_with(tmp_path / "releases", "v2", COMPATIBLE["v2"])
    control = str(Lake(tmp_path / "lake").control_path(JOB.name))
    stop = threading.Event()
    policy = replace(FAST, warm_standby=False, probation_batches=1, probation_seconds=1)
    supervisor, seen = _supervisor(tmp_path, lease_holder(Path(control), hold_seconds=-1, exit_code=0, ttl=2), policy,
                                   stop)
    thread, result = _in_thread(supervisor)
    wait_for(lambda: supervisor.state.state == "running", 60, "the driver")
    driver = supervisor.state.driver_pid

    asked = request_rollout(control, JOB.name, "v2", None, "alice", "a parser fix")
    preflight = wait_for(lambda: (r := read_rollout(control)) and r["phase"] == "preflight" and r, 30, "the pre-flight")
    os.kill(driver, signal.SIGKILL)  # while the new version's standby still checks itself
    rollout = wait_for(lambda: (r := read_rollout(control)) and r["phase"] not in ACTIVE and r, 60, "the rollout's end")

    assert rollout["id"] == asked["id"] and rollout["phase"] == "done", rollout
    assert [h["phase"] for h in rollout["history"]] == ["requested", "preflight", "handover", "probation", "done"]
    assert rollout["driver_ended"] == "the driver was killed by SIGKILL"
    lease = read_lease(control)
    assert (lease.pid, lease.released) == (preflight["standby_pid"], False) and job_version(control) == "v2"
    assert seen.kinds() == ["start", "rollout", "handover", "probation_passed"], seen.events
    assert seen.events[2]["reason"] == "the driver was killed by SIGKILL"
    assert supervisor.state.restarts_total == 0 and supervisor.version == "v2"

    stop.set()
    thread.join(timeout=60)
    assert result == {"outcome": "stopped"}
    assert_no_process_left(driver, preflight["standby_pid"])
