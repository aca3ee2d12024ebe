"""A warm standby driver: started, warmed up and waiting, it takes a continuous job over the moment its lease is free.

Usage (the supervisor starts one beside the running driver when the job's registry entry or its DAG asks)::

    python -m spark_jobs run cloudtrail_etl --trigger processing-time:10s --standby

Most of a new driver's time to its first commit is its own start, not the work: the JVM and the session, Delta's
first snapshot of each table, the classes and Python workers of the first micro-batch. A standby does all of that
while the running driver still holds the checkpoint's single-writer lease:

1. it builds its session, creates the tables if missing and reads each table's Delta snapshot;
2. it warms up: one micro-batch of a recent input file (or nothing, on an empty landing) through the job's own
   transform and write path into a scratch lake of its own (:func:`warm_up`), so every class, plan and Python
   worker the live path needs has been used once; the scratch lake is deleted;
3. it waits for the lease (:func:`wait_for_lease`), checking it every :data:`POLL_SECONDS`, and not at all while
   supervision is paused (an on-call hold, :mod:`spark_jobs.control.supervision.hold`: a driver stopped by hand
   then stays stopped). What it warmed goes cold while it waits: Spark ends a Python worker idle for a minute,
   and each commit of the running driver leaves the cached Delta snapshot further behind. So a daemon thread
   (:func:`keep_warm`, every :data:`KEEP_WARM_SECONDS`) runs one tiny Python task per core and refreshes each
   table's snapshot from the log (a fraction of a CPU-second each time; it dies with the process and holds no
   lock the take-over needs). The lease is free when its holder releases it, when its heartbeat is older than
   its ttl, or, on this host, the moment its holder's process is gone (a driver killed with ``kill -9``): the
   standby then takes it with the lease's own exclusive create, exactly as any driver would, so fencing stays
   as strict as ever (a paused old driver that wakes up finds a newer generation and writes nothing);
4. it starts the streaming query from the checkpoint, like any driver.

While it waits, ``<lake>/control/<job>/standby.json`` says so (:mod:`spark_jobs.control.supervision.standby_state`);
SIGTERM ends it at once (it holds nothing). It costs a second driver's memory the whole time: see
docs/continuous-jobs.md for the figure.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions

log = logging.getLogger("spark_jobs")

POLL_SECONDS = 0.2
# Spark ends Python workers idle for a minute; a Delta snapshot falls behind with every commit of the running driver.
KEEP_WARM_SECONDS = 30.0


def wait_for_lease(acquire: Callable[[], object], stopped: Callable[[], bool], held: Callable[[], bool] = lambda: False,
                   keep_warm: Callable[[], None] | None = None, poll: float = POLL_SECONDS,
                   warm_every: float = KEEP_WARM_SECONDS):
    """Call ``acquire`` every ``poll`` seconds until it returns a lease (``LeaseHeld`` means not yet).

    :param held: while true (supervision paused: an on-call hold), the lease is not even tried for.
    :param keep_warm: run every ``warm_every`` seconds on a thread of its own while waiting, so that
        what the first batch needs stays loaded (:func:`keep_warm`); the lease keeps being polled meanwhile.
    :returns: the lease, or ``None`` when ``stopped()`` says the standby was asked to stop first.
    """
    from spark_jobs.control.checkpoint.lease import LeaseHeld

    done = threading.Event()
    if keep_warm is not None:
        def tick() -> None:
            while not done.wait(warm_every):
                try:
                    keep_warm()
                except Exception as exc:  # noqa: BLE001 - the first batch then does the work itself
                    log.info("keeping the standby warm failed: %s", str(exc).strip().splitlines()[0][:200])

        threading.Thread(target=tick, name="standby-keep-warm", daemon=True).start()
    try:
        while not stopped():
            if not held():
                try:
                    return acquire()
                except LeaseHeld:
                    pass
            time.sleep(poll)
        return None
    finally:
        done.set()


def warm_up(spark: SparkSession, job: JobSpec, options: RunOptions) -> float:
    """One micro-batch of a recent input file through the job's transform and write path into a scratch lake
    (deleted after), and each real table's Delta snapshot read: what a first batch would otherwise do cold.

    :returns: the seconds it took.
    """
    from pyspark.errors import AnalysisException

    from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
    from spark_jobs.driver.write import write_batch
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables

    started = time.monotonic()
    for target in table_targets(job, options.lake):
        try:
            spark.read.format("delta").load(str(target.path)).limit(0).collect()  # Delta's snapshot, cached
        except AnalysisException:  # not created yet (a fresh lake): the running driver creates it
            pass
    sample = _recent_file(job, options)
    scratch = Path(os.environ.get("SPARK_LOCAL_DIRS", "/tmp").split(",")[0]) / f"standby-warm-up-{os.getpid()}"
    try:
        lake = Lake(scratch)
        targets = table_targets(job, lake)
        create_tables(spark, targets, output_schemas(spark, job))
        if sample is not None and not job.stateful:
            from spark_jobs.driver.source_readers import read_file_list

            frame = read_file_list(spark, [sample])
            writer = ExactlyOnceWriter(spark, targets, f"standby-warm-up-{os.getpid()}")
            write_batch(frame, 0, job=job, module=job_module(job), writer=writer, targets=targets, files=[sample])
    except Exception as exc:  # noqa: BLE001 - a warm-up is worth less than the standby itself
        log.warning("standby warm-up of %s did not complete (%s); the first batch will be colder", job.name, exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - started


def _worker(job_module_name: str):
    """A Python worker's task: import what the job's decoding imports, give back nothing."""

    def run(batches):
        import importlib

        import pyarrow  # noqa: F401

        importlib.import_module(job_module_name)
        for _ in batches:
            pass
        return iter(())

    return run


def keep_warm(spark: SparkSession, job: JobSpec, targets: list) -> None:
    """Load again what a first batch needs: a Python worker per core (Spark ends one idle for a minute) and each
    table's Delta snapshot brought up to the running driver's newest commit (``DESCRIBE DETAIL`` reads the log,
    no data file), so a take-over replays only the commits after it."""
    from delta.tables import DeltaTable

    cores = spark.sparkContext.defaultParallelism
    spark.range(0, cores, 1, cores).mapInArrow(_worker(job.module), "id long").collect()
    for target in targets:
        DeltaTable.forPath(spark, str(target.path)).detail().collect()


def _recent_file(job: JobSpec, options: RunOptions) -> str | None:
    """The newest input file the stream has taken (from its discovery window), or ``None``."""
    if not job.discovers_files:
        return None
    from spark_jobs.control.checkpoint.store import Location
    from spark_jobs.control.discovery.settings import run_settings
    from spark_jobs.control.discovery.state import DiscoveryLog, DiscoveryStateError

    settings = run_settings(job, options)
    log_ = DiscoveryLog(Location.of(settings.checkpoint))
    try:
        window = log_.window(settings.layout) if log_.exists() else None
    except DiscoveryStateError:
        return None
    if not window or not window.seen:
        return None
    return max(window.seen.items(), key=lambda item: (item[1], item[0]))[0]
