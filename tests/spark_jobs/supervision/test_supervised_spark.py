"""The Supervisor with real Spark drivers: a SIGSTOPped and a kill -9'd driver are replaced, the tables end
exact, a stop is graceful (python -m spark_jobs run, and spark-submit), and no process is left behind."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from dataclasses import replace

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tools.sample_data import write_sample_landing
from spark_jobs.control.supervision.command import driver_command
from spark_jobs.control.supervision.state import read_events, read_supervisor_state
from spark_jobs.control.supervision.supervisor import Supervisor
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.processes import assert_no_process_left, batch_ids, caught_up, table_event_ids, wait_for

JOB = get_job("cloudtrail_etl")
POLICY = replace(JOB.restart, initial_backoff_seconds=1, max_backoff_seconds=5, window_seconds=600,
                 poll_seconds=0.5, stop_grace_seconds=90, warm_standby=False)
TTL = 6


class Run:
    """A Supervisor of cloudtrail_etl on a test lake, running in a thread."""

    def __init__(self, tmp_path, spark_submit: bool = False) -> None:
        self.landing, self.lake = tmp_path / "landing", tmp_path / "lake"
        self.landing.mkdir()
        self.control = str(Lake(self.lake).control_path(JOB.name))
        self.checkpoint = self.lake / "checkpoints" / JOB.name
        self.events: list[dict] = []
        self.stop = threading.Event()
        command = driver_command(JOB, lake=str(self.lake), input_path=str(self.landing), trigger="processing-time:1s",
                                 spark_submit=spark_submit, lease_ttl_seconds=TTL,
                                 extra_args=["--max-files-per-trigger", "2"])
        self.supervisor = Supervisor(JOB, Lake(self.lake), command, POLICY, notify=self.events.append,
                                     should_stop=self.stop.is_set, input_path=str(self.landing), cwd=str(PROJECT_ROOT))
        self.result: dict = {}
        self.thread = threading.Thread(target=lambda: self.result.update(outcome=self.supervisor.run()), daemon=True)
        self.good: list[str] = []
        self.pgids: list[int] = []

    def land(self, name: str, seed: int) -> None:
        self.good += write_sample_landing(self.landing / name, files=2, records_per_file=5, seed=seed,
                                          include_bad_files=False).good_event_ids

    def running_driver(self, not_pid: int | None = None):
        """The lease of the running driver (once the supervisor says running), else None."""
        state = read_supervisor_state(self.control) or {}
        lease = read_lease(self.control)
        if state.get("state") == "running" and lease and not lease.released and lease.pid != not_pid:
            if self.supervisor.driver.pgid not in self.pgids:
                self.pgids.append(self.supervisor.driver.pgid)
            return lease
        return None

    def wait_caught_up(self) -> None:
        wait_for(lambda: caught_up(self.checkpoint, self.landing), 300, "every landed file committed")

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=POLICY.stop_grace_seconds + 60)
        assert not self.thread.is_alive()


def test_a_stalled_and_a_killed_driver_are_replaced_and_the_tables_end_exact(tmp_path):
    run = Run(tmp_path)
    run.land("a", seed=41)
    run.thread.start()
    try:
        first = wait_for(run.running_driver, 300, "the first driver")
        run.wait_caught_up()

        os.kill(first.pid, signal.SIGSTOP)  # paused: its heartbeat stops, its process lives
        second = wait_for(lambda: run.running_driver(not_pid=first.pid), 300, "a driver replacing the stalled one")
        assert not os.path.exists(f"/proc/{first.pid}")
        run.land("b", seed=42)
        run.wait_caught_up()

        os.kill(second.pid, signal.SIGKILL)
        third = wait_for(lambda: run.running_driver(not_pid=second.pid), 300, "a driver replacing the killed one")
        run.land("c", seed=43)
        run.wait_caught_up()
    finally:
        run.finish()

    assert run.result == {"outcome": "stopped"}
    kinds = [e["kind"] for e in run.events]
    assert kinds == ["start", "restart", "restart", "stop"], run.events
    stalled, killed, stopped = run.events[1:]
    assert stalled["reason"].startswith(f"stalled: the driver (pid {first.pid}) has not renewed its lease for ")
    assert killed["reason"] == "the driver was killed by SIGKILL"
    assert stopped["outcome"].startswith("the driver stopped after its micro-batch in "), stopped
    assert stopped["exit_code"] == 0
    assert [e["kind"] for e in read_events(run.control)] == kinds
    state = read_supervisor_state(run.control)
    assert (state["state"], state["driver_pid"], state["restarts_in_window"]) == ("stopped", None, 2)
    lease = read_lease(run.control)
    assert (lease.pid, lease.released) == (third.pid, True)
    assert batch_ids(run.checkpoint / "offsets") == batch_ids(run.checkpoint / "commits")
    assert Counter(table_event_ids(run.lake)) == Counter(run.good)
    assert_no_process_left(*run.pgids)


def test_a_spark_submit_driver_stops_gracefully_after_its_micro_batch(tmp_path):
    run = Run(tmp_path, spark_submit=True)
    run.land("a", seed=51)
    run.thread.start()
    try:
        lease = wait_for(run.running_driver, 300, "the spark-submit driver")
        # The lease names the Python driver, the JVM's child: the process that gets the SIGTERM.
        assert lease.pid != run.supervisor.driver.pid and run.supervisor.driver.owns(lease.pid)
        run.wait_caught_up()
        run.land("b", seed=52)  # a stop asked for while new files wait
    finally:
        run.finish()
    assert run.result == {"outcome": "stopped"}
    assert [e["kind"] for e in run.events] == ["start", "stop"], run.events
    assert run.events[-1]["outcome"].startswith("the driver stopped after its micro-batch in ")
    assert run.events[-1]["exit_code"] == 0
    assert read_lease(run.control).released
    assert batch_ids(run.checkpoint / "offsets") == batch_ids(run.checkpoint / "commits")  # no half-done batch
    ids = table_event_ids(run.lake)
    assert len(ids) == len(set(ids)) and set(run.good[:10]) <= set(ids) <= set(run.good)
    assert_no_process_left(*run.pgids)
