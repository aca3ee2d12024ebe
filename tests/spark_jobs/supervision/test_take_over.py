"""A warm standby takes over whatever dies, under a stand-in of spark-submit's process tree (no Spark).

The supervised command is ``submit_like.py`` around ``lease_holder.py``: a parent that plays the JVM and outlives its
child, the stand-in Python driver that holds the real lease (the pid ``status`` shows), by a few seconds, as a JVM
runs its shutdown hooks. The kills are the ones a person or the kernel makes: the Python driver, the JVM, the whole
group. The standby was started well before the kill (longer ago than the supervisor waits for a standby still
warming up): each kill is a take-over, adopted at once, never a stall and never a cold start. A standby that does not
take over is an event of its own and an alert. The job's standby setting, switched while it runs, starts and stops
the standby. The same take-overs with real Spark drivers through a running scheduler are in
tests/dags/test_continuous_supervision.py and the benchmark's ``trial recovery --through airflow --standby``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace

import pytest

import spark_jobs.control.supervision.supervisor as supervisor_module
from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.control.monitoring.health import check_job
from spark_jobs.control.supervision.job_settings import set_warm_standby
from spark_jobs.control.supervision.supervisor import Supervisor
from spark_jobs.model.lake import Lake
from spark_jobs.model.policies import RestartPolicy
from spark_jobs.registry import get_job
from tests.helpers.processes import assert_no_process_left, lease_holder, submit_like, wait_for

NOT_IN_THE_FAST_TIER = "waits out a standby's warm-up and a JVM's linger in real time"
JOB = get_job("cloudtrail_etl")
POLICY = RestartPolicy(initial_backoff_seconds=30, multiplier=2, max_backoff_seconds=30, max_restarts=3,
                       window_seconds=600, healthy_reset_seconds=600, poll_seconds=0.1, stop_grace_seconds=10,
                       warm_standby=True)
LINGER_SECONDS = 3.0  # the stand-in JVM outlives its Python driver this long


class Supervised:
    """A supervisor in a thread over the stand-in process tree, with what it told."""

    def __init__(self, tmp_path, policy: RestartPolicy = POLICY) -> None:
        self.lake = Lake(tmp_path / "lake")
        self.control = str(self.lake.control_path(JOB.name))
        self.events: list[dict] = []
        self.stop = threading.Event()
        command = submit_like(lease_holder(self.lake.control_path(JOB.name), hold_seconds=-1, exit_code=0, ttl=2),
                              LINGER_SECONDS)
        self.supervisor = Supervisor(JOB, self.lake, command, policy, notify=self.events.append,
                                     should_stop=self.stop.is_set, input_path=str(tmp_path / "landing"))
        self.supervisor.standby_after_seconds = 0
        self.result: dict = {}
        self.thread = threading.Thread(target=lambda: self.result.update(outcome=self.supervisor.run()), daemon=True)
        self.thread.start()

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events]

    def holder(self) -> int | None:
        lease = read_lease(self.control)
        return lease.pid if lease is not None and not lease.released else None

    def warm_standby(self) -> int:
        """The standby's group, once the supervisor says it is warm."""
        return wait_for(lambda: self.supervisor.state.standby == "warm" and self.supervisor.state.standby_pid, 60,
                        "a warm standby")

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=90)
        assert self.result == {"outcome": "stopped"}


@pytest.fixture
def fast_start_timeout(monkeypatch):
    """The supervisor waits this little for a standby still warming up: a standby started earlier than that before
    the kill (as any standby is, minutes into a night) must still be adopted."""
    monkeypatch.setattr(supervisor_module, "START_TIMEOUT_SECONDS", 1.0)


@pytest.mark.parametrize("killed", ["python_driver", "jvm", "group"])
def test_a_warm_standby_takes_over_whatever_dies(tmp_path, fast_start_timeout, killed):
    job = Supervised(tmp_path)
    try:
        standby = job.warm_standby()
        old_group = job.supervisor.driver.pgid
        python_driver = wait_for(job.holder, 30, "the driver's lease")
        assert python_driver != old_group  # the lease is the child's, as under spark-submit
        time.sleep(1.5)  # the standby's start is now older than START_TIMEOUT_SECONDS
        if killed == "python_driver":  # the pid `status` shows
            os.kill(python_driver, signal.SIGKILL)
        elif killed == "jvm":  # the OOM killer's usual choice, the largest process
            os.kill(old_group, signal.SIGKILL)
        else:
            os.killpg(old_group, signal.SIGKILL)
        new_holder = wait_for(lambda: job.holder() not in (None, python_driver) and job.holder(), 30,
                              "the standby holding the lease")
        wait_for(lambda: "restart" in job.kinds(), 10, "the take-over's restart event")
        assert os.getpgid(new_holder) == standby
        wait_for(lambda: job.supervisor.state.state == "running" and job.supervisor.state.driver_pid == new_holder,
                 30, "the adopted standby running the job")
    finally:
        job.finish()
    [take_over] = [e for e in job.events if e["kind"] == "restart"]
    assert take_over["take_over"] is True and take_over["backoff_seconds"] == 0 and take_over["standby_pid"] == standby
    expected = {"python_driver": f"the Python driver (pid {python_driver}) died while its JVM (pid {old_group}) ran on"
                                 f": the warm standby (pid {new_holder}) took the lease over",
                "jvm": "the driver was killed by SIGKILL", "group": "the driver was killed by SIGKILL"}[killed]
    assert take_over["reason"] == expected
    assert "take_over_failed" not in job.kinds()
    assert job.kinds()[:3] == ["start", "standby", "restart"]
    state = job.supervisor.state
    assert (state.take_overs_total, state.restarts_total, state.last_take_over_failed) == (1, 1, None)
    assert state.last_take_over_at is not None
    assert_no_process_left(old_group, standby)


def test_a_standby_that_does_not_take_over_is_an_event_and_an_alert(tmp_path, fast_start_timeout, monkeypatch):
    monkeypatch.setattr(supervisor_module, "TAKE_OVER_SECONDS", 1.0)
    job = Supervised(tmp_path, replace(POLICY, initial_backoff_seconds=0.1))
    try:
        standby = job.warm_standby()
        old_group = job.supervisor.driver.pgid
        python_driver = wait_for(job.holder, 30, "the driver's lease")
        os.killpg(standby, signal.SIGSTOP)  # the standby hangs: it cannot take the lease
        os.killpg(old_group, signal.SIGKILL)
        wait_for(lambda: "take_over_failed" in job.kinds(), 30, "the failed take-over's event")
        new_driver = wait_for(lambda: job.holder() not in (None, python_driver) and job.holder(), 30,
                              "a new driver started instead")
        assert os.getpgid(new_driver) not in (old_group, standby)
        health = check_job(JOB, job.lake.root, input_path=str(tmp_path / "landing"))
    finally:
        job.finish()
    [failed] = [e for e in job.events if e["kind"] == "take_over_failed"]
    assert failed["reason"] == (f"the driver was killed by SIGKILL; the warm standby (pid {standby}) did not take "
                                f"over: it did not take the lease within 1 s of the driver's end")
    assert failed["outcome"].startswith("starting a new driver from the same checkpoint instead")
    [restart] = [e for e in job.events if e["kind"] == "restart"]
    assert "take_over" not in restart
    assert [c.code for c in health.conditions] == ["take_over_failed"]
    assert health.standby["last_take_over_failed"].endswith("it did not take the lease within 1 s of the driver's end")
    assert_no_process_left(old_group, standby)


def test_the_standby_setting_is_followed_while_the_job_runs(tmp_path):
    job = Supervised(tmp_path, replace(POLICY, warm_standby=False))
    try:
        wait_for(job.holder, 30, "the driver's lease")
        wait_for(lambda: job.supervisor.state.standby == "off", 10, "no standby: the policy says off")
        assert job.supervisor.state.standby_setting == "off (the registry's default)"
        set_warm_standby(job.control, True, by="alice", reason="the night shift wants one")
        standby = job.warm_standby()
        assert job.supervisor.state.standby_setting.startswith("on (set by alice at ")
        health = check_job(JOB, job.lake.root, input_path=str(tmp_path / "landing"))
        assert (health.standby["state"], health.standby["pid"]) == ("warm", standby)
        set_warm_standby(job.control, False, by="bob")
        wait_for(lambda: job.supervisor.state.standby == "off" and job.supervisor.standby is None, 15,
                 "the standby stopped")
    finally:
        job.finish()
    standby_events = [e for e in job.events if e["kind"] == "standby"]
    assert [e["outcome"].split()[:2] for e in standby_events] == [["started", "a"], ["stopped", "the"]]
    assert standby_events[1]["reason"].startswith("the warm standby was switched off (off (set by bob at ")
    assert "restart" not in job.kinds()
    assert_no_process_left(standby)
