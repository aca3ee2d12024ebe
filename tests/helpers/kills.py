"""The kill -9 harness: a real ``python -m spark_jobs run`` driver in a process group of its own
(:class:`JobDriver`), killed (the group: the Python driver and its JVM) at a chosen point of a micro-batch, and
the files such a kill leaves in a table's folder.

Used by every test that kills, pauses or stops a real driver: the crash-recovery tests of the CloudTrail job (the
random kills of the live path on disk, and on a bucket), the Cowrie job's real samples, the S3 notifications, the
Kafka job killed mid-stream, the alerts' kill and restart, the runner's lease (a paused driver fenced, a killed one
taken over), the warm standby beside real drivers and the command line's SIGTERM stop. docs/testing.md lists its
parts ("The kill -9 harness"); "How a kill -9 lands between a batch's writes and its commit" says why
:func:`kill_with_files_uncommitted` freezes the driver first.

The driver is started by hand, not through the supervisor's child handling (``spark_jobs.control.supervision``):
the tests pause, kill and stop it at moments the supervisor never chooses, and some test the supervisor itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple
from urllib.parse import unquote

from spark_jobs.control.supervision.child import group_members
from tests.helpers.processes import batch_ids, wait_for
from tests.helpers.project import PROJECT_ROOT

KILL_WITHIN_SECONDS = 420  # a batch in flight shows within this on a loaded 2-core machine (a JVM's start included)


def run_command(job: str, *args: str) -> list[str]:
    """The argv of ``python -m spark_jobs run JOB ARGS``."""
    return [sys.executable, "-m", "spark_jobs", "run", job, *args]


class JobDriver:
    """A job's driver process started now, in a process group of its own (its JVM is in it), its stdout and
    stderr appended to ``log``. As a context manager it kills what is left of the group on exit.

    :param command: the argv (:func:`run_command`, or the supervisor's ``driver_command``).
    :param log: the file the output is appended to (two drivers may share one).
    :param env: the environment (default: this process's).
    """

    def __init__(self, command: list[str], log: Path, env: dict | None = None):
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        """The Python driver's pid, which is also its process group's id."""
        return self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def tail(self, chars: int = 4000) -> str:
        """The end of the log."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def group_alive(self) -> bool:
        """Whether any process of the group (the driver, its JVM) is alive."""
        return bool(group_members(self.pid))

    def kill9(self) -> int:
        """SIGKILL the whole group (a paused one too) and reap the driver; returns its exit status."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.process.wait(30)

    def pause(self) -> None:
        """SIGSTOP the whole group, JVM included: nothing of it runs, its lease ages."""
        os.killpg(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def terminate(self) -> None:
        """SIGTERM the Python driver alone: it stops its query after the micro-batch (a standby at once)."""
        self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 120) -> int:
        """:meth:`terminate`, then wait; returns the exit status."""
        self.terminate()
        return self.process.wait(timeout)

    def wait_for(self, condition: Callable, timeout: float, what: str):
        """Poll ``condition`` until it returns something truthy (returned); fail naming ``what`` with the log's
        tail when the time is up or the driver ends first."""
        def ready():
            value = condition()
            assert value or self.poll() is None, (
                f"the driver ended (status {self.poll()}) while waiting for {what}; its log ends:\n{self.tail()}")
            return value
        return wait_for(ready, timeout, what, context=lambda: f"the driver's log ends:\n{self.tail()}")

    def __enter__(self) -> JobDriver:
        return self

    def __exit__(self, *exc) -> None:
        if self.poll() is None or self.group_alive():
            self.kill9()


def start_cloudtrail_driver(landing: Path, lake: Path, log: Path) -> JobDriver:
    return JobDriver(run_command("cloudtrail_etl", "--input", str(landing), "--lake", str(lake),
                                 "--max-files-per-trigger", "3"), log)


class Kill(NamedTuple):
    """Where a kill hit: the last committed batch (-1: none), the batch in flight, the delay used (if any)."""

    committed: int
    in_flight: int
    delay: float | None = None


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


def delta_rs_sees_only_committed_rows(table: Path, seen: set[str] | None = None) -> int:
    """Read ``table`` (a folder, or a bucket's prefix as a UPath) with delta-rs, a reader that is not Spark, while a
    killed batch's files lie in it: every committed row once, not one row of those files. Returns their rows.

    :param seen: files left by earlier kills (their batches ran again since and committed new files); this
        kill's are added. On a bucket an object is whole once it is there; on disk a file cut off mid-write is
        left out.
    """
    import deltalake
    import pyarrow.parquet as pq

    from spark_jobs.model.object_store import delta_rs_options

    seen = set() if seen is None else seen
    dt = deltalake.DeltaTable(str(table), storage_options=delta_rs_options(str(table)))
    ids = dt.to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist()
    committed = sum(int(h["operationMetrics"]["numTargetRowsInserted"]) for h in dt.history()
                    if h["operation"] == "MERGE")
    assert len(ids) == len(set(ids)) == committed
    new = uncommitted_files(table) - seen
    seen |= new
    orphan_ids = set()
    for name in new:
        if whole_parquet(table / name):  # through pathlib's API: a folder's file or a bucket's object alike
            with (table / name).open("rb") as handle:
                orphan_ids.update(pq.read_table(handle, columns=["eventID"]).column("eventID").to_pylist())
    assert not orphan_ids & set(ids)  # not one row of the uncommitted batch
    return len(orphan_ids)


def kill_mid_batch(driver: JobDriver, checkpoint: Path, after_commits: int,
                   delay: float | Callable[[], float]) -> Kill:
    """SIGKILL the driver's group (Python driver and JVM) while a batch is planned but not committed, ``delay`` s
    after it is first seen planned (after ``after_commits`` commits); if that batch committed within the delay,
    the next one is waited for.

    :param delay: seconds, or a function drawing them (called again for each batch that committed first).
    """
    draw = delay if callable(delay) else lambda: delay
    wait = draw()
    deadline = time.monotonic() + KILL_WITHIN_SECONDS
    while time.monotonic() < deadline:
        assert driver.poll() is None, f"the job ended before it could be killed; its log ends:\n{driver.tail()}"
        commits, offsets = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
        if len(commits) >= after_commits and offsets - commits:
            time.sleep(wait)
            commits, offsets = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
            if offsets - commits:
                driver.kill9()
                return Kill(max(commits, default=-1), max(offsets - commits), wait)
            wait = draw()
        time.sleep(0.02)
    raise AssertionError(f"no micro-batch was in flight within {KILL_WITHIN_SECONDS} s")


def kill_with_files_uncommitted(driver: JobDriver, checkpoint: Path, table: Path, after_commits: int) -> Kill:
    """SIGKILL the driver's group while the batch in flight has written whole Parquet files into ``table`` that
    no Delta commit added.

    Looking at the folder and then at the log races the batch's commit: on a bucket an object is visible
    only once whole and the commit follows within moments, often before a look ends. So the driver is
    frozen (SIGSTOP of its process group) as soon as a file shows that was not there when the batch was
    planned, and the log and the folder are read while it cannot commit: whole files that no commit added
    and the batch still uncommitted, and it is killed; else (its commit came first, or its files are
    still being written) it goes on (SIGCONT) and is watched at its next look or its next batch.
    """
    deadline = time.monotonic() + KILL_WITHIN_SECONDS
    batch, before, passed = None, set(), set()
    while time.monotonic() < deadline:
        assert driver.poll() is None, \
            f"the job ended before its files could be caught uncommitted; its log ends:\n{driver.tail()}"
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
        driver.pause()
        try:
            time.sleep(0.5)  # requests the driver sent before it stopped are served
            uncommitted = uncommitted_files(table) - before  # one read of the log and the folder: it cannot commit
            if any(whole_parquet(table / f) for f in uncommitted) and batch not in batch_ids(checkpoint / "commits"):
                driver.kill9()
                return Kill(max(batch_ids(checkpoint / "commits"), default=-1), batch)
            if not uncommitted:
                passed.add(batch)  # the table's commit of this batch came first: watch the next one
        finally:
            if driver.poll() is None:
                driver.resume()
        time.sleep(0.05)  # files still being written: let it write before the next look
    raise AssertionError(f"no micro-batch left files uncommitted within {KILL_WITHIN_SECONDS} s")


def kills_leaving_orphans(start: Callable[[int], JobDriver], checkpoint: Path, table: Path,
                          after_commits: int, orphan_rows: Callable[[], int], last_gap: int,
                          last_delay: float) -> tuple[list[Kill], list[int]]:
    """Two kills of two drivers: the first once the batch in flight has left whole files in ``table``
    that no commit added (:func:`kill_with_files_uncommitted`); the second ``last_gap`` batches later,
    ``last_delay`` s after a batch is planned, without looking at the table.

    :param start: starts a driver (its argument numbers the start, for its log).
    :param orphan_rows: after a kill, the rows in the table's folder that no commit added.
    :returns: each kill, and each kill's orphan rows.
    """
    with start(0) as first:
        kills = [kill_with_files_uncommitted(first, checkpoint, table, after_commits)]
    orphans = [orphan_rows()]
    with start(1) as second:
        kills.append(kill_mid_batch(second, checkpoint, kills[-1].committed + last_gap, last_delay))
    orphans.append(orphan_rows())
    return kills, orphans
