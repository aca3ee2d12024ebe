"""The kill -9 harness: a real ``python -m spark_jobs run`` driver killed (its process group: the Python driver and
its JVM) while a micro-batch is planned and not committed, and the files such a kill leaves in a table's folder.

Used by the crash-recovery tests of the CloudTrail job (on disk and on a bucket), the Cowrie job's real samples,
the random kills of the live path and the S3 notifications' tests. docs/testing.md, "How a kill -9 lands between a
batch's writes and its commit", says why :func:`kill_with_files_uncommitted` freezes the driver first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable
from urllib.parse import unquote

from tests.helpers.processes import batch_ids
from tests.helpers.project import PROJECT_ROOT


def start_cloudtrail_driver(landing: Path, lake: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake),
         "--max-files-per-trigger", "3"],
        cwd=PROJECT_ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def whole_parquet(path: Path) -> bool:
    """Whether a Parquet file is whole (ends with its footer's magic bytes)."""
    try:
        with path.open("rb") as handle:
            handle.seek(-4, 2)
            return handle.read() == b"PAR1"
    except OSError:
        return False


def data_files(table: Path) -> set[str]:
    """The data files in the table folder (whole or still being written), relative to it, in one listing (on
    a bucket, ``find``: one fresh LIST of the prefix, not s3fs's cached listing of each folder); the Delta
    log's own Parquet checkpoints are not data files."""
    fs = getattr(table, "fs", None)
    if fs is not None:
        root = table.path.rstrip("/") + "/"
        names = {f.removeprefix(root) for f in fs.find(root)}
    else:
        names = {str(p.relative_to(table)) for p in table.rglob("*.parquet")}
    return {name for name in names if name.endswith(".parquet") and not name.startswith("_delta_log/")}


def uncommitted_files(table: Path) -> set[str]:
    """Parquet files in the table folder (whole or still being written) that no commit in its Delta log added."""
    added = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    return data_files(table) - added


def kill_mid_batch(process: subprocess.Popen, checkpoint: Path, after_commits: int, delay: float) -> tuple[int, int]:
    """SIGKILL the job's process group (Python driver and JVM) while a batch is planned but not committed,
    ``delay`` s after it is first seen planned.

    :returns: (last committed batch, batch in flight) at the moment of the kill.
    """
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        assert process.poll() is None, "the job ended before it could be killed"
        commits, offsets = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
        if len(commits) >= after_commits and offsets - commits:
            time.sleep(delay)
            commits, offsets = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
            if offsets - commits:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return max(commits), max(offsets - commits)
        time.sleep(0.02)
    raise AssertionError("no micro-batch was in flight within 420 s")


def kill_with_files_uncommitted(process: subprocess.Popen, checkpoint: Path, table: Path,
                                 after_commits: int) -> tuple[int, int]:
    """SIGKILL the job's process group while the batch in flight has written whole Parquet files into
    ``table`` that no Delta commit added.

    Looking at the folder and then at the log races the batch's commit: on a bucket an object is visible
    only once whole and the commit follows within moments, often before a look ends. So the driver is
    frozen (SIGSTOP of its process group) as soon as a file shows that was not there when the batch was
    planned, and the log and the folder are read while it cannot commit: whole files that no commit added
    and the batch still uncommitted, and it is killed; else (its commit came first, or its files are
    still being written) it goes on (SIGCONT) and is watched at its next look or its next batch.

    :returns: (last committed batch, batch in flight) at the moment of the kill.
    """
    deadline = time.monotonic() + 420
    batch, before, passed = None, set(), set()
    while time.monotonic() < deadline:
        assert process.poll() is None, "the job ended before its files could be caught uncommitted"
        commits, offsets = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
        in_flight = offsets - commits - passed
        if len(commits) < after_commits or not in_flight:
            time.sleep(0.1)  # a batch is planned seconds before it writes (on a bucket, each look is two LISTs)
            continue
        if batch != max(in_flight):
            batch, before = max(in_flight), data_files(table)
        for _ in range(50):  # watch the folder alone for a while: the files come soon after the plan
            if data_files(table) - before:
                break
            time.sleep(0.005)
        else:
            continue
        os.killpg(process.pid, signal.SIGSTOP)
        try:
            time.sleep(0.5)  # requests the driver sent before it stopped are served
            uncommitted = uncommitted_files(table) - before  # one read of the log and the folder: it cannot commit
            if any(whole_parquet(table / f) for f in uncommitted) and batch not in batch_ids(checkpoint / "commits"):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return max(batch_ids(checkpoint / "commits")), batch
            if not uncommitted:
                passed.add(batch)  # the table's commit of this batch came first: watch the next one
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGCONT)
        time.sleep(0.05)  # files still being written: let it write before the next look
    raise AssertionError("no micro-batch left files uncommitted within 420 s")


def kills_leaving_orphans(start: Callable[[int], subprocess.Popen], checkpoint: Path, table: Path,
                           after_commits: int, orphan_rows: Callable[[], int], last_gap: int,
                           last_delay: float) -> tuple[list[tuple[int, int]], list[int]]:
    """Two kills of two drivers: the first once the batch in flight has left whole files in ``table``
    that no commit added (:func:`kill_with_files_uncommitted`); the second ``last_gap`` batches later,
    ``last_delay`` s after a batch is planned, without looking at the table.

    :param start: starts a driver (its argument numbers the start, for its log).
    :param orphan_rows: after a kill, the rows in the table's folder that no commit added.
    :returns: (last committed batch, batch in flight) of each kill, and each kill's orphan rows.
    """
    kills = [kill_with_files_uncommitted(start(0), checkpoint, table, after_commits)]
    orphans = [orphan_rows()]
    kills.append(kill_mid_batch(start(1), checkpoint, kills[-1][0] + last_gap, last_delay))
    orphans.append(orphan_rows())
    return kills, orphans
