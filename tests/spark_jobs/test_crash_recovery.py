"""kill -9 in the middle of a micro-batch, restart: nothing lost, nothing duplicated, in either table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from spark_jobs.sample_data import write_sample_landing
from tests.conftest import PROJECT_ROOT
from tests.spark_jobs.conftest import file_name


def _batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.glob("*") if p.name.isdigit()} if folder.is_dir() else set()


def _start(landing: Path, lake: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake),
         "--max-files-per-trigger", "3"],
        cwd=PROJECT_ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill_mid_batch(process: subprocess.Popen, checkpoint: Path, after_commits: int, delay: float) -> tuple[int, int]:
    """SIGKILL the job's process group (Python driver and JVM) while a batch is planned but not committed.

    :returns: (last committed batch, batch in flight) at the moment of the kill.
    """
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert process.poll() is None, "the job ended before it could be killed"
        commits, offsets = _batch_ids(checkpoint / "commits"), _batch_ids(checkpoint / "offsets")
        in_flight = offsets - commits
        if len(commits) >= after_commits and in_flight:
            time.sleep(delay)
            commits, offsets = _batch_ids(checkpoint / "commits"), _batch_ids(checkpoint / "offsets")
            if offsets - commits:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return max(commits), max(offsets - commits)
        time.sleep(0.05)
    raise AssertionError("no micro-batch was in flight within 240 s")


def test_kill_9_mid_batch_then_restart_gives_exact_tables(tmp_path, tables):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    manifest = write_sample_landing(landing, files=30, records_per_file=40, seed=3)
    checkpoint = lake / "checkpoints" / "cloudtrail_etl"

    kills = []
    for after_commits, delay in ((2, 0.0), (5, 0.8)):
        process = _start(landing, lake, tmp_path / f"kill-{after_commits}.log")
        kills.append(_kill_mid_batch(process, checkpoint, after_commits, delay))
    for committed, in_flight in kills:
        assert in_flight == committed + 1  # each kill hit a planned, uncommitted batch

    final = subprocess.run(
        [sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake),
         "--max-files-per-trigger", "3"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]

    assert _batch_ids(checkpoint / "offsets") == _batch_ids(checkpoint / "commits")
    frames = tables(lake)
    ids = [r.eventID for r in frames["cloudtrail_events"].select("eventID").collect()]
    assert len(ids) == len(manifest.good_event_ids) == 30 * 40 + 55
    assert Counter(ids) == Counter(manifest.good_event_ids)
    quarantined = sorted((file_name(r.source_file), r.record_index, r.reason)
                         for r in frames["cloudtrail_quarantine"].collect())
    assert quarantined == sorted((b.path.name, b.record_index, b.reason) for b in manifest.bad)
