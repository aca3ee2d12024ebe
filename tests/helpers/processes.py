"""Shared pieces of the tests of processes: waiting, the process table, a small driver that holds a real lease."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil

from spark_jobs.control.supervision.child import group_members

HERE = Path(__file__).resolve().parent
LEASE_HOLDER = HERE / "lease_holder.py"


def wait_for(condition, timeout: float, what: str, context=None):
    """Poll ``condition`` until it returns something truthy (returned), or fail naming ``what``.

    :param context: called on failure, its text added to the message (e.g. a log's tail).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, (f"timed out after {timeout:g} s waiting for {what}"
                                             + (f"; {context()}" if context else ""))
        time.sleep(0.2)


_BEFORE_THE_TEST: set[int] = set()


def remember_processes_before_the_test() -> None:
    """Note the descendants alive before a test starts (the shared SparkSession's JVM and its Python daemon).

    They belong to the test session, not to the test, so :func:`live_children` leaves them (and anything they
    start) out.
    """
    _BEFORE_THE_TEST.clear()
    _BEFORE_THE_TEST.update(p.pid for p in psutil.Process().children(recursive=True))


def _started_by_the_session(process: psutil.Process) -> bool:
    try:
        return process.pid in _BEFORE_THE_TEST or any(a.pid in _BEFORE_THE_TEST for a in process.parents())
    except psutil.NoSuchProcess:
        return False


def live_children() -> list[psutil.Process]:
    """Every live (non-zombie) descendant of this test process that the test itself started."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and not _started_by_the_session(child):
                alive.append(child)
        except psutil.NoSuchProcess:
            continue
    return alive


def assert_no_process_left(*pgids: int | None) -> None:
    """No descendant of this process, and no member of the given process groups, is alive."""
    children = live_children()
    assert children == [], [(c.pid, c.cmdline()) for c in children]
    for pgid in pgids:
        if pgid is not None:
            assert group_members(pgid) == [], f"process group {pgid} still has {group_members(pgid)}"


def lease_holder(control: Path, hold_seconds: float, exit_code: int, ttl: float = 2.0,
                 trigger: str = "processing-time:1s") -> list[str]:
    """A pyspark-free stand-in driver: takes the real lease (exit 3 when another live driver holds it), heartbeats,
    exits ``exit_code`` after ``hold_seconds``; ``trigger`` is what its lease says it runs."""
    return [sys.executable, str(LEASE_HOLDER), str(control), str(hold_seconds), str(exit_code), str(ttl), trigger]


def project_env() -> dict:
    return dict(os.environ)


def batch_ids(folder: Path) -> set[int]:
    """The batch ids in a checkpoint's ``offsets`` or ``commits`` folder (a Path, or the lake's UPath on a bucket)."""
    return {int(p.name) for p in folder.glob("*") if p.name.isdigit()} if folder.is_dir() else set()


def table_event_ids(lake: Path) -> list[str]:
    """Every eventID in the lake's ``cloudtrail_events`` Delta table (read by delta-rs, not Spark)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(lake / "tables" / "cloudtrail_events"))
    return table.to_pyarrow_dataset().to_table(columns=["eventID"]).column("eventID").to_pylist()


def caught_up(checkpoint: Path, landing: Path) -> bool:
    """Every landed file was read by a committed batch, and every planned batch is committed."""
    from tools.bench.supervised_job import committed_files

    landed = {p.name for p in landing.rglob("*.json.gz")}
    return (bool(landed) and landed <= committed_files(checkpoint)
            and batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits"))


def inspected_caught_up(job, lake: Path, landing: Path) -> bool:
    """No file waits and every planned batch is committed, as ``checkpoint inspect`` reads it: unlike
    :func:`caught_up` it holds after a long run, whose early discovery manifests are compacted away (the files of its
    first batches can no longer be listed one by one)."""
    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

    report = inspect_checkpoint(job, str(lake), str(landing))
    return (report.backlog_files == 0 and report.in_flight_files == 0
            and report.latest_offset_batch == report.latest_commit_batch)


SUBMIT_LIKE = Path(__file__).with_name("submit_like.py")


def submit_like(command: list[str], linger_seconds: float) -> list[str]:
    """``command`` under a stand-in of spark-submit's process tree: a parent (the JVM) whose child (the Python
    driver) holds the lease, and which outlives it by ``linger_seconds`` (see ``submit_like.py``)."""
    return [sys.executable, str(SUBMIT_LIKE), str(linger_seconds), *command]
