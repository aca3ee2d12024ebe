"""kill -9 in the middle of a micro-batch, restart: nothing lost, nothing duplicated, in either table.

While a killed batch's Parquet files lie in the table folder (written, never committed), a reader that
is not Spark (delta-rs) sees exactly the committed rows: the Delta log, not the folder, is the table.

The killed drivers are real ``python -m spark_jobs run`` processes (their JVM dies with them); the
restart that finishes the job runs the same runner in the session's SparkSession (no third JVM start).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import json
import time
from collections import Counter
from pathlib import Path
from typing import Callable
from urllib.parse import unquote

from tools.sample_data import write_sample_landing
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.cloudtrail import file_name


def _batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.glob("*") if p.name.isdigit()} if folder.is_dir() else set()


def _start(landing: Path, lake: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake),
         "--max-files-per-trigger", "3"],
        cwd=PROJECT_ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _complete(path: Path) -> bool:
    """Whether a Parquet file is whole (ends with its footer's magic bytes)."""
    try:
        with path.open("rb") as handle:
            handle.seek(-4, 2)
            return handle.read() == b"PAR1"
    except OSError:
        return False


def _data_files(table: Path) -> set[str]:
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


def _uncommitted_files(table: Path) -> set[str]:
    """Parquet files in the table folder (whole or still being written) that no commit in its Delta log added."""
    added = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    return _data_files(table) - added


def _kill_mid_batch(process: subprocess.Popen, checkpoint: Path, after_commits: int, delay: float) -> tuple[int, int]:
    """SIGKILL the job's process group (Python driver and JVM) while a batch is planned but not committed,
    ``delay`` s after it is first seen planned.

    :returns: (last committed batch, batch in flight) at the moment of the kill.
    """
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        assert process.poll() is None, "the job ended before it could be killed"
        commits, offsets = _batch_ids(checkpoint / "commits"), _batch_ids(checkpoint / "offsets")
        if len(commits) >= after_commits and offsets - commits:
            time.sleep(delay)
            commits, offsets = _batch_ids(checkpoint / "commits"), _batch_ids(checkpoint / "offsets")
            if offsets - commits:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return max(commits), max(offsets - commits)
        time.sleep(0.02)
    raise AssertionError("no micro-batch was in flight within 420 s")


def _kill_with_files_uncommitted(process: subprocess.Popen, checkpoint: Path, table: Path,
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
        commits, offsets = _batch_ids(checkpoint / "commits"), _batch_ids(checkpoint / "offsets")
        in_flight = offsets - commits - passed
        if len(commits) < after_commits or not in_flight:
            time.sleep(0.1)  # a batch is planned seconds before it writes (on a bucket, each look is two LISTs)
            continue
        if batch != max(in_flight):
            batch, before = max(in_flight), _data_files(table)
        for _ in range(50):  # watch the folder alone for a while: the files come soon after the plan
            if _data_files(table) - before:
                break
            time.sleep(0.005)
        else:
            continue
        os.killpg(process.pid, signal.SIGSTOP)
        try:
            time.sleep(0.5)  # requests the driver sent before it stopped are served
            uncommitted = _uncommitted_files(table) - before  # one read of the log and the folder: it cannot commit
            if any(_complete(table / f) for f in uncommitted) and batch not in _batch_ids(checkpoint / "commits"):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return max(_batch_ids(checkpoint / "commits")), batch
            if not uncommitted:
                passed.add(batch)  # the table's commit of this batch came first: watch the next one
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGCONT)
        time.sleep(0.05)  # files still being written: let it write before the next look
    raise AssertionError("no micro-batch left files uncommitted within 420 s")


def _kills_leaving_orphans(start: Callable[[int], subprocess.Popen], checkpoint: Path, table: Path,
                           after_commits: int, orphan_rows: Callable[[], int], last_gap: int,
                           last_delay: float) -> tuple[list[tuple[int, int]], list[int]]:
    """Two kills of two drivers: the first once the batch in flight has left whole files in ``table``
    that no commit added (:func:`_kill_with_files_uncommitted`); the second ``last_gap`` batches later,
    ``last_delay`` s after a batch is planned, without looking at the table.

    :param start: starts a driver (its argument numbers the start, for its log).
    :param orphan_rows: after a kill, the rows in the table's folder that no commit added.
    :returns: (last committed batch, batch in flight) of each kill, and each kill's orphan rows.
    """
    kills = [_kill_with_files_uncommitted(start(0), checkpoint, table, after_commits)]
    orphans = [orphan_rows()]
    kills.append(_kill_mid_batch(start(1), checkpoint, kills[-1][0] + last_gap, last_delay))
    orphans.append(orphan_rows())
    return kills, orphans


def _delta_rs_sees_only_committed_rows(table: Path, seen: set[str]) -> int:
    """Read the table with delta-rs while the killed batch's files are on disk; returns those files' rows.

    :param seen: files left by earlier kills (their batches were re-run and committed since, in new
        files); updated with this kill's.
    """
    import deltalake
    import pyarrow.parquet as pq

    dt = deltalake.DeltaTable(str(table))
    ids = dt.to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist()
    committed = sum(int(h["operationMetrics"]["numTargetRowsInserted"]) for h in dt.history()
                    if h["operation"] == "MERGE")
    assert len(ids) == len(set(ids)) == committed
    orphans = [f for f in _uncommitted_files(table) - seen if _complete(table / f)]  # others were cut off mid-write
    seen |= _uncommitted_files(table)
    orphan_ids = {i for f in orphans for i in pq.read_table(table / f, columns=["eventID"]).column("eventID").to_pylist()}
    assert not orphan_ids & set(ids)  # not one row of the uncommitted batch
    return len(orphan_ids)


def test_kill_9_mid_batch_then_restart_gives_exact_tables(tmp_path, tables, run_job):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    manifest = write_sample_landing(landing, files=30, records_per_file=40, seed=3)
    checkpoint = lake / "checkpoints" / "cloudtrail_etl"
    events = lake / "tables" / "cloudtrail_events"

    seen: set[str] = set()
    kills, orphan_rows = _kills_leaving_orphans(
        lambda n: _start(landing, lake, tmp_path / f"kill-{n}.log"), checkpoint, events, after_commits=2,
        orphan_rows=lambda: _delta_rs_sees_only_committed_rows(events, seen), last_gap=4, last_delay=0.8)
    for committed, in_flight in kills:
        assert in_flight == committed + 1  # each kill hit a planned, uncommitted batch
    assert orphan_rows[0] > 0  # the first killed batch's files were there, with rows delta-rs did not show

    # The restart: the same run (--max-files-per-trigger 3) from the killed drivers' checkpoint, to the end.
    final = run_job(landing, lake, maxFilesPerTrigger="3")
    assert final.skipped is None and final.batches >= 1, final

    assert _batch_ids(checkpoint / "offsets") == _batch_ids(checkpoint / "commits")
    frames = tables(lake)
    ids = [r.eventID for r in frames["cloudtrail_events"].select("eventID").collect()]
    assert len(ids) == len(manifest.good_event_ids) == 30 * 40 + 55
    assert Counter(ids) == Counter(manifest.good_event_ids)
    quarantined = sorted((file_name(r.source_file), r.record_index, r.reason)
                         for r in frames["cloudtrail_quarantine"].collect())
    assert quarantined == sorted((b.path.name, b.record_index, b.reason) for b in manifest.bad)
