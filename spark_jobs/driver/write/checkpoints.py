"""Delta checkpoints of a live table, written by a thread of the driver instead of inside a batch's commit.

Delta writes a checkpoint of a table's state every ``delta.checkpointInterval`` commits (10 by default) inside the
commit that reaches it (its post-commit ``CheckpointHook``): the state is computed with Spark jobs and written as
Parquet before the commit returns. That makes one live batch in ten several times slower than the others, and
slower still the first time in a new driver (``bench --only freshness_large``; docs/benchmarks.md), while its
files' events wait.

A staged insert's transaction runs without that hook (:func:`defer`); after its commit, :func:`after_commit` writes
the checkpoint of the version it committed on a daemon thread, one at a time per table: one still being written
when the next is due makes that one skipped (Delta checkpoints again ten commits later; a reader replays the
commits after the newest checkpoint, one more JSON file per commit). A checkpoint is a copy of what the log already
says: written late, or not at all (the process ends first), it changes no reader's view and no commit's conflict
check, and Delta writes it whole or not at all (a temporary file renamed; one PUT on S3). :func:`drain` waits for
those in flight at the end of a run.

Why our own: delta-spark 4.4 writes checkpoints only inside a commit or when asked (``DeltaLog.checkpoint``), and
has no setting to write them asynchronously; the hook list is reached through py4j (pinned: delta-spark 4.4.0).
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("spark_jobs")

_running: dict[str, threading.Thread] = {}  # table path -> the thread writing its checkpoint
_lock = threading.Lock()


def defer(jvm, txn) -> bool:
    """Take Delta's post-commit checkpoint out of the transaction ``txn`` (its other hooks stay), to be written by
    :func:`after_commit`; ``False`` when that fails (the commit then writes it, as Delta does)."""
    try:
        hook = getattr(getattr(jvm.org.apache.spark.sql.delta.hooks, "CheckpointHook$"), "MODULE$")
        getattr(txn.postCommitHooks(), "$minus$eq")(hook)
        return True
    except Exception as exc:  # noqa: BLE001 - Delta's own checkpoint is the way back
        log.info("Delta's post-commit checkpoint kept in the commit (%s)", str(exc).strip().splitlines()[0][:200])
        return False


def after_commit(jvm, delta_log, txn, version: int, table: str) -> threading.Thread | None:
    """Write the checkpoint of ``version`` of the table of ``delta_log`` on a daemon thread when Delta would have
    written it in the commit (``version`` a multiple of the table's checkpoint interval) and none is being written
    for the table; returns the thread, if any.

    :param txn: the committed transaction (its snapshot's metadata holds the interval).
    :param table: the table's path, which names it.
    """
    interval = int(jvm.org.apache.spark.sql.delta.DeltaConfigs.CHECKPOINT_INTERVAL().fromMetaData(
        txn.snapshot().metadata()))
    if version <= 0 or version % interval:
        return None
    with _lock:
        running = _running.get(table)
        if running is not None and running.is_alive():
            log.info("table %s: the checkpoint of an earlier version is still being written; version %d's skipped",
                     table, version)
            return None
        thread = threading.Thread(target=_write, args=(jvm, delta_log, version, table), daemon=True,
                                  name=f"delta-checkpoint-{version}")
        _running[table] = thread
        thread.start()
        return thread


def _write(jvm, delta_log, version: int, table: str) -> None:
    """The checkpoint of ``version`` (Delta's ``checkpoint`` logs its own failures and raises none)."""
    started = time.monotonic()
    none = jvm.scala.Option.apply(None)
    try:
        delta_log.checkpoint(delta_log.getSnapshotAt(version, none, none, False), none)
        log.info("table %s: checkpoint of version %d written in %.1f s, off the batches' path", table, version,
                 time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 - a missed checkpoint costs readers a longer replay, nothing else
        log.warning("table %s: the checkpoint of version %d was not written (%s)", table, version,
                    str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__)


def drain(timeout: float = 120.0) -> None:
    """Wait up to ``timeout`` seconds for the checkpoints being written (the end of a run)."""
    deadline = time.monotonic() + timeout
    with _lock:
        threads = list(_running.values())
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
