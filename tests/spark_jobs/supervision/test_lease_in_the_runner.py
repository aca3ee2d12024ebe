"""The runner's single-writer lease with real Spark drivers: refused, fenced, taken over."""

from __future__ import annotations

import os
import signal
import socket
from collections import Counter

from spark_jobs.control.checkpoint.lease import read_lease
from tools.sample_data import write_sample_landing
from tests.helpers.kills import JobDriver, run_command
from tests.helpers.project import run_cli
from tests.helpers.processes import batch_ids, table_event_ids, wait_for

TTL = "6"


def _driver(landing, lake, log) -> JobDriver:
    return JobDriver(run_command("cloudtrail_etl", "--input", str(landing), "--lake", str(lake), "--trigger",
                                 "processing-time:1s", "--lease-ttl", TTL), log)


def test_second_driver_is_refused_a_paused_one_is_fenced_and_a_killed_ones_lease_is_taken_over(tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    checkpoint, control = lake / "checkpoints" / "cloudtrail_etl", lake / "control" / "cloudtrail_etl"
    good = write_sample_landing(landing / "a", files=3, records_per_file=5, seed=31, include_bad_files=False).good_event_ids
    with _driver(landing, lake, tmp_path / "first.log") as first:
        first.wait_for(lambda: (checkpoint / "commits" / "0").exists(), 300, "the first driver's first commit")
        held = read_lease(str(control))
        assert (held.pid, held.generation, held.released) == (first.pid, 1, False)
        assert held.details["query_id"] and held.details["checkpoint"] == str(checkpoint)

        # A second driver on the live checkpoint: exit 3 at once, one line naming the live driver.
        refused = run_cli("run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake), timeout=120)
        assert refused.returncode == 3, refused.stderr[-2000:]
        [line] = refused.stderr.strip().splitlines()
        assert line.startswith(f"error: job cloudtrail_etl is already running: its checkpoint is held by pid "
                               f"{first.pid} on host {socket.gethostname()} (generation 1, started {held.started_at}, "
                               "heartbeat "), line
        assert "s ago, ttl 6 s); stop that driver first" in line

        # Paused longer than the ttl: a new driver takes over; the old one wakes up and stops unwritten.
        os.kill(first.pid, signal.SIGSTOP)  # the Python driver alone: its heartbeat stops, its JVM runs on
        wait_for(lambda: read_lease(str(control)).expired(), 30, "the paused driver's lease to expire")
        good += write_sample_landing(landing / "b", files=2, records_per_file=5, seed=32,
                                     include_bad_files=False).good_event_ids
        with _driver(landing, lake, tmp_path / "second.log") as second:
            second.wait_for(lambda: read_lease(str(control)).generation == 2, 120, "the second driver's takeover")
            os.kill(first.pid, signal.SIGCONT)
            assert first.wait(120) == 1, first.tail()
            last = (tmp_path / "first.log").read_text().strip().splitlines()[-1]
            assert last.startswith("error: job cloudtrail_etl stopped: lease generation 1 on job cloudtrail_etl is "
                                   "lost: "), last
            assert "this driver must stop without writing" in last
            second.wait_for(lambda: (checkpoint / "commits" / "1").exists(), 300, "the second driver's commit")
            assert read_lease(str(control)).pid == second.pid

            # kill -9: the lease stays unreleased, and is taken over at once (its pid is gone).
            second.kill9()
    stale = read_lease(str(control))
    assert (stale.generation, stale.released, stale.expired()) == (2, False, True)
    good += write_sample_landing(landing / "c", files=2, records_per_file=5, seed=33,
                                 include_bad_files=False).good_event_ids
    third = run_cli("run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake), "--lease-ttl", TTL,
                    timeout=600)
    assert third.returncode == 0, third.stderr[-3000:]
    final = read_lease(str(control))
    assert (final.generation, final.released, final.pid) == (3, True, final.pid)
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits")
    assert Counter(table_event_ids(lake)) == Counter(good)
