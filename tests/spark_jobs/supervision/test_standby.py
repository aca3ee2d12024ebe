"""A warm standby beside a real Spark driver, on one shared lake: the lease and its fencing stay exact.

The drivers are real ``python -m spark_jobs run`` processes (each in its own process group) writing one lake;
the tests run in order and hand their drivers on (the standby that took over in one is the running driver of
the next), so the module starts eight JVMs in all. Each test ends with the exact table: every good eventID once,
the quarantine exactly the bad items, every planned batch committed.

- a paused old driver (SIGSTOP of its whole group, JVM included) whose standby took over (after its warm-up ran
  the live path into scratch tables), resumed (SIGCONT) while new files wait: it writes nothing and exits refusing;
- a take-over racing a restart (the running driver killed and a plain driver started at the same moment): one
  of them holds the lease, the other waits (the standby) or refuses (the plain driver, status 3);
- through the supervisor: a standby killed while it waits is replaced (no restart), the driver runs on; then
  the driver killed: the standby takes over and is adopted (a restart with ``take_over``), a new one starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.control.supervision.command import driver_command
from spark_jobs.control.supervision.ownership import LEASE_HELD_EXIT_STATUS
from spark_jobs.control.supervision.standby_state import read_standby
from spark_jobs.control.supervision.state import read_supervisor_state
from spark_jobs.control.supervision.supervisor import Supervisor
from spark_jobs.driver.standby import WARM_UP_ROUNDS
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tests.helpers.cloudtrail import file_name
from tests.helpers.processes import assert_no_process_left, batch_ids, table_event_ids, wait_for
from tests.helpers.kills import JobDriver
from tests.helpers.project import PROJECT_ROOT
from tools.sample_data import write_sample_landing

JOB = get_job("cloudtrail_etl")
TTL = 6  # a paused driver's lease expires after this; every driver renews it every TTL/3
POLICY = replace(JOB.restart, initial_backoff_seconds=1, max_backoff_seconds=5, window_seconds=600, poll_seconds=0.5,
                 stop_grace_seconds=90, warm_standby=True)
START_SECONDS = 300  # a JVM's start on a busy 2-core machine


@dataclass
class SharedLake:
    """One landing and one lake for the module, the drivers started on it, and what must be in the tables."""

    root: Path
    good: list[str] = field(default_factory=list)
    bad: list[tuple] = field(default_factory=list)
    processes: list[JobDriver] = field(default_factory=list)

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def control(self) -> str:
        return str(Lake(self.lake).control_path(JOB.name))

    @property
    def checkpoint(self) -> Path:
        return self.lake / "checkpoints" / JOB.name

    def command(self, standby: bool = False) -> list[str]:
        return driver_command(JOB, lake=str(self.lake), input_path=str(self.landing), trigger="processing-time:1s",
                              lease_ttl_seconds=TTL, extra_args=["--max-files-per-trigger", "20"]) + (
            ["--standby"] if standby else [])

    def start(self, name: str, standby: bool = False) -> JobDriver:
        """A driver (or a standby) in a process group of its own, its output in ``<name>.log``."""
        process = JobDriver(self.command(standby), self.root / f"{name}.log")
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def land(self, name: str, seed: int, bad: bool = False) -> None:
        manifest = write_sample_landing(self.landing / name, files=2, records_per_file=5, seed=seed,
                                        include_bad_files=bad)
        self.good += manifest.good_event_ids
        self.bad += [(b.path.name, b.record_index, b.reason) for b in manifest.bad]

    def holder(self) -> int | None:
        """The pid holding a live lease, if any."""
        lease = read_lease(self.control)
        return lease.pid if lease is not None and not lease.released and not lease.expired() else None

    def warm_standby(self, pid: int) -> bool:
        said = read_standby(self.control)
        return bool(said and said.get("pid") == pid)

    def caught_up(self) -> bool:
        """Every landed file the stream takes (not the hidden and temporary ones) was read by a committed batch,
        and every planned batch is committed."""
        from tools.bench.supervised_job import committed_files

        landed = {p.name for p in self.landing.rglob("*")
                  if p.is_file() and not p.name.startswith((".", "_")) and not p.name.endswith(".tmp")}
        return (landed <= committed_files(self.checkpoint)
                and batch_ids(self.checkpoint / "offsets") == batch_ids(self.checkpoint / "commits"))

    def wait_caught_up(self) -> None:
        wait_for(self.caught_up, START_SECONDS, "every landed file committed")

    def assert_exact(self) -> None:
        """Every good event once, the quarantine exactly the bad items, no planned batch left uncommitted."""
        from deltalake import DeltaTable

        assert batch_ids(self.checkpoint / "offsets") == batch_ids(self.checkpoint / "commits")
        assert Counter(table_event_ids(self.lake)) == Counter(self.good)
        quarantine = DeltaTable(str(self.lake / "tables" / "cloudtrail_quarantine")).to_pyarrow_dataset().to_table(
            columns=["source_file", "record_index", "reason"]).to_pylist()
        assert sorted((file_name(r["source_file"]), r["record_index"], r["reason"]) for r in quarantine) == sorted(
            self.bad)

    def running(self) -> JobDriver:
        """The live process holding the lease (a plain driver started when there is none), once it holds it."""
        alive = [p for p in self.processes if p.poll() is None and p.pid == self.holder()]
        if alive:
            return alive[0]
        process = self.start(f"driver-{len(self.processes)}")
        process.wait_for(lambda: self.holder() == process.pid, START_SECONDS, "the driver's lease")
        return process

    def stop_all(self) -> None:
        """SIGTERM every live driver (a standby exits at once, a driver after its micro-batch), then SIGKILL."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill9()
        wait_for(lambda: not any(p.group_alive() for p in self.processes), 60, "every driver's JVM gone")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    shared = SharedLake(tmp_path_factory.mktemp("standby"))
    shared.land("a", seed=61, bad=True)
    yield shared
    for process in shared.processes:  # a test that failed may have left one paused
        if process.poll() is None:
            process.resume()
    shared.stop_all()


def test_a_paused_old_driver_that_wakes_after_its_standby_took_over_writes_nothing(shared):
    old = shared.running()
    shared.wait_caught_up()
    standby = shared.start("standby-a", standby=True)
    standby.wait_for(lambda: shared.warm_standby(standby.pid), START_SECONDS, "the standby warm and waiting")
    warmed = shared.log("standby-a")  # the live path ran, into scratch tables: the exact tables below prove it
    assert f"standby warm-up of {JOB.name}: round {WARM_UP_ROUNDS} (" in warmed and "did not complete" not in warmed

    old.pause()  # the whole driver paused, JVM included: its lease ages
    shared.land("b", seed=62)
    wait_for(lambda: shared.holder() == standby.pid, 3 * TTL, "the standby taking the expired lease")
    shared.wait_caught_up()
    assert not shared.warm_standby(standby.pid)  # it said it no longer waits

    shared.land("c", seed=63)  # work waiting for the old driver when it wakes
    old.resume()
    assert old.wait(timeout=120) == 1
    said = [line for line in shared.log(f"driver-{shared.processes.index(old)}").splitlines()
            if line.startswith("error: ")]
    assert said and said[-1].startswith(f"error: job {JOB.name} "), said
    assert "is lost" in said[-1] or "Concurrent update" in said[-1], said[-1]
    shared.wait_caught_up()
    assert shared.holder() == standby.pid and standby.poll() is None
    shared.assert_exact()


def test_a_standby_racing_a_restart_leaves_one_writer(shared):
    running = shared.running()
    standby = shared.start("standby-c", standby=True)
    standby.wait_for(lambda: shared.warm_standby(standby.pid), START_SECONDS, "the standby warm and waiting")
    shared.land("d", seed=64)

    running.kill9()  # the running driver dies and a plain driver starts at the same moment
    plain = shared.start("plain-c")
    winner = wait_for(lambda: shared.holder() not in (None, running.pid) and shared.holder(), START_SECONDS,
                      "a new holder of the lease")
    assert winner in (standby.pid, plain.pid)
    if winner == standby.pid:  # the plain driver finds the lease held: it refuses, writing nothing
        assert plain.wait(timeout=120) == LEASE_HELD_EXIT_STATUS
        assert f"error: job {JOB.name} is already running" in shared.log("plain-c")
    else:  # the standby keeps waiting beside the new driver
        assert standby.poll() is None and shared.warm_standby(standby.pid)
    shared.land("e", seed=65)
    shared.wait_caught_up()
    assert shared.holder() == winner
    shared.assert_exact()
    shared.stop_all()
    assert read_lease(shared.control).released


def test_the_supervisor_replaces_a_killed_standby_and_adopts_the_one_that_takes_over(shared):
    shared.stop_all()  # the lake to the supervisor alone
    events: list[dict] = []
    stop = threading.Event()
    supervisor = Supervisor(JOB, Lake(shared.lake), shared.command(), POLICY, notify=events.append,
                            should_stop=stop.is_set, input_path=str(shared.landing), cwd=str(PROJECT_ROOT))
    supervisor.standby_after_seconds = 0
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(outcome=supervisor.run()), daemon=True)
    thread.start()
    pgids = []
    try:
        def standby_warm(not_pid=None):
            pid = supervisor.state.standby_pid
            return pid and pid != not_pid and shared.warm_standby(pid) and pid

        first = wait_for(lambda: shared.holder(), START_SECONDS, "the supervised driver")
        killed = wait_for(standby_warm, START_SECONDS, "a warm standby")
        driver_group = supervisor.driver.pgid
        pgids += [driver_group, killed]
        os.killpg(killed, signal.SIGKILL)  # a standby killed while it waits
        shared.land("f", seed=66)
        second = wait_for(lambda: standby_warm(not_pid=killed), START_SECONDS, "the standby's replacement")
        pgids.append(second)
        shared.wait_caught_up()
        assert (shared.holder(), supervisor.state.restarts_total) == (first, 0)  # the driver ran on

        os.killpg(driver_group, signal.SIGKILL)  # the driver dies: the standby takes over, and is adopted
        wait_for(lambda: (read_supervisor_state(shared.control) or {}).get("driver_pid") == second
                 and shared.holder() == second, 60, "the standby running the job")
        shared.land("g", seed=67)
        shared.wait_caught_up()
        pgids.append(wait_for(lambda: supervisor.state.standby_pid, 60, "a new standby"))
    finally:
        stop.set()
        thread.join(timeout=POLICY.stop_grace_seconds + 60)
    assert result == {"outcome": "stopped"}
    kinds = [(e["kind"], e["outcome"].split()[0]) for e in events]
    assert kinds == [("start", "starting"), ("standby", "started"), ("standby", "replaced"), ("standby", "started"),
                     ("restart", "taken"), ("standby", "started"), ("stop", "the")], events
    replaced, take_over = events[2], events[4]
    assert replaced["reason"] == f"the warm standby (pid {killed}) was killed by SIGKILL while it waited"
    assert replaced["consecutive_failures"] == replaced["restarts_in_window"] == 0
    assert take_over["reason"] == "the driver was killed by SIGKILL"
    assert (take_over["take_over"], take_over["backoff_seconds"], take_over["standby_pid"],
            take_over["restarts_in_window"]) == (True, 0, second, 1)
    state = read_supervisor_state(shared.control)
    assert (state["state"], state["restarts_total"], state["driver_pid"], state["standby_pid"]) == (
        "stopped", 1, None, None)
    assert read_lease(shared.control).released and read_standby(shared.control) is None
    shared.assert_exact()
    assert_no_process_left(*pgids)
