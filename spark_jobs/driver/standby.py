"""A warm standby driver: started, warmed up and waiting, it takes a continuous job over the moment its lease is free.

Usage (the supervisor starts one beside the running driver when the job's registry entry or its DAG asks)::

    python -m spark_jobs run cloudtrail_etl --trigger processing-time:10s --standby

Most of a new driver's time to its first commit is its own start, not the work: the JVM and the session, Delta's
first snapshot of each table, the classes and Python workers of the first micro-batch. A standby does all of that
while the running driver still holds the checkpoint's single-writer lease:

1. it builds its session, creates the tables if missing, prepares the query (its source DataFrame, the session's
   settings: all but the start) and reads each table's Delta snapshot;
2. it warms up: the live path's first batch, run :data:`WARM_UP_ROUNDS` times (:func:`warm_up`): a streaming query
   of the job's own source (the landing source, given the files of the stream's newest batch as a file list) with
   ``foreachBatch`` into the job's own write plan and MERGE against scratch copies of its tables, under its
   own Spark settings, so every class, plan, Python worker and callback the take-over's batch needs has been used
   and the driver's planner code runs compiled; the scratch lake is deleted. Measured beside a running driver on a
   busy 2-core machine, this cut a take-over's first batch from about 3x a warm batch to about one (the query's
   start from 1.3 s to 0.1 s after the lease: Py4J's callback server and the query's classes are ready);
3. it waits for the lease (:func:`wait_for_lease`), checking it every :data:`POLL_SECONDS`, and not at all while
   supervision is paused (an on-call hold, :mod:`spark_jobs.control.supervision.hold`: a driver stopped by hand
   then stays stopped). What it warmed goes cold while it waits: Spark ends a Python worker idle for a minute,
   and each commit of the running driver leaves the cached Delta snapshot further behind. So a daemon thread
   (:func:`keep_warm`, every :data:`KEEP_WARM_SECONDS`) runs a tiny task through two Python workers per core and
   refreshes each table's snapshot from the log (a fraction of a CPU-second each time; it dies with the process
   and holds no lock the take-over needs). The lease is free when its holder releases it, when its heartbeat is
   older than its ttl, or, on this host, the moment its holder's process is gone (a driver killed with
   ``kill -9``): the standby then takes it with the lease's own exclusive create, exactly as any driver would, so
   fencing stays as strict as ever (a paused old driver that wakes up finds a newer generation and writes nothing);
4. it starts the streaming query from the checkpoint, like any driver.

While it waits, ``<lake>/control/<job>/standby.json`` says so (:mod:`spark_jobs.control.supervision.standby_state`);
SIGTERM ends it at once (it holds nothing). It costs a second driver's memory the whole time: see
docs/continuous-jobs.md for the figure.
"""

from __future__ import annotations

import json
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
# Streaming batches of the warm-up: the first inserts, the others run the same plans hot (see warm_up).
WARM_UP_ROUNDS = 2
# A warm-up batch that has not ended by then is stopped (the standby then waits less warm).
SCRATCH_BATCH_TIMEOUT_SECONDS = 600.0


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


def warm_up(spark: SparkSession, job: JobSpec, options: RunOptions, rounds: int | None = None) -> float:
    """The live path's first batch, ``rounds`` times, into a scratch lake (deleted after), and each real table's
    Delta snapshot read: what a first batch would otherwise do cold.

    Each round is one batch of a streaming query of its own over a scratch checkpoint: the job's source (the landing source,
    given the newest batch's files as an explicit file list, so nothing is listed and no notification received),
    ``foreachBatch`` into :func:`~spark_jobs.driver.write.write_batch` under the job's Spark settings, the same
    plan (pipelined or cached) and MERGE shape against scratch copies of the job's tables. The first round inserts
    the rows; the others merge the same keys again under a new writer id (nothing inserted), so the driver's
    planner code runs hot (the JVM compiles what runs often) before the take-over's batch needs it.

    :param rounds: streaming batches to run (default :data:`WARM_UP_ROUNDS`).
    :returns: the seconds it took.
    """
    from pyspark.errors import AnalysisException
    from pyspark.java_gateway import ensure_callback_server_started

    from spark_jobs.driver.job_modules import output_schemas, table_targets
    from spark_jobs.driver.write.delta_writer import create_tables

    started = time.monotonic()
    ensure_callback_server_started(spark.sparkContext._gateway)  # what foreachBatch does at the query's start
    for target in table_targets(job, options.lake):
        try:
            spark.read.format("delta").load(str(target.path)).limit(0).collect()  # Delta's snapshot, cached
        except AnalysisException:  # not created yet (a fresh lake): the running driver creates it
            pass
    sample = _recent_files(job, options)
    scratch = Path(os.environ.get("SPARK_LOCAL_DIRS", "/tmp").split(",")[0]) / f"standby-warm-up-{os.getpid()}"
    try:
        create_tables(spark, table_targets(job, Lake(scratch)), output_schemas(spark, job))
        if sample and not job.stateful:
            file_list = scratch / "files.json"
            file_list.write_text(json.dumps([f.row() for f in sample]))
            for round_ in range(WARM_UP_ROUNDS if rounds is None else rounds):
                took = _scratch_batch(spark, job, options, scratch, str(file_list), round_)
                log.info("standby warm-up of %s: round %d (%d files) in %.1f s", job.name, round_ + 1, len(sample),
                         took)
    except Exception as exc:  # noqa: BLE001 - a warm-up is worth less than the standby itself
        log.warning("standby warm-up of %s did not complete (%s); the first batch will be colder", job.name,
                    str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - started


def _scratch_batch(spark: SparkSession, job: JobSpec, options: RunOptions, scratch: Path, file_list: str,
                   round_: int) -> float:
    """One batch of a streaming query of the job's source over ``file_list`` into the scratch lake's tables, under the
    live query's trigger and written as it writes (see :func:`warm_up`); a checkpoint of its own, deleted after."""
    from dataclasses import replace

    from spark_jobs.control.discovery import planner
    from spark_jobs.control.discovery.settings import run_settings
    from spark_jobs.driver.job_modules import job_module, table_targets
    from spark_jobs.driver.session import session_conf
    from spark_jobs.driver.source_readers import read_landing
    from spark_jobs.driver.write import write_batch
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter

    started = time.monotonic()
    checkpoint = scratch / "checkpoints" / f"round-{round_}"
    # no queue: a scratch stream must never receive (nor delete) the live stream's notifications
    settings = replace(run_settings(job, options, spark.sparkContext.defaultParallelism), checkpoint=str(checkpoint),
                       file_list=file_list, queue_url=None)
    targets = table_targets(job, Lake(scratch))
    module = job_module(job)
    writer = ExactlyOnceWriter(spark, targets, f"standby-warm-up-{os.getpid()}-{round_}")

    def on_batch(frame, batch_id: int) -> None:
        files = [f.key for f in planner.batch_files(settings, batch_id) if f.size]
        write_batch(frame, batch_id, job=job, module=module, writer=writer, targets=targets, files=files)

    source = read_landing(spark, settings)
    with session_conf(spark, job.spark_conf):
        query = (source.writeStream.outputMode(job.output_mode).foreachBatch(on_batch)
                 .option("checkpointLocation", str(checkpoint)).trigger(**options.trigger.writer_kwargs()).start())
    # Stopped after its first batch: under the live query's trigger (processing time) it would not end by itself.
    try:
        deadline = time.monotonic() + SCRATCH_BATCH_TIMEOUT_SECONDS
        while query.isActive and not query.recentProgress:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the scratch batch did not end within {SCRATCH_BATCH_TIMEOUT_SECONDS:g} s")
            query.awaitTermination(0.1)
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()).strip().splitlines()[0][:300])
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    return time.monotonic() - started


def _worker(job_module_name: str):
    """A Python worker's task: import what the live batch's workers import, pass the rows on."""

    def run(batches):
        import importlib

        import pyarrow  # noqa: F401

        from spark_jobs.transforms import arrow_without_pandas

        arrow_without_pandas.settle()
        importlib.import_module("spark_jobs.driver.landing_source")  # the live batch's read, in the same workers
        importlib.import_module(job_module_name)
        yield from batches

    return run


def keep_warm(spark: SparkSession, job: JobSpec, targets: list) -> None:
    """Load again what a first batch needs: two Python workers per core (Spark ends one idle for a minute; a task of
    the live batch runs two: the landing source's read and the job's decoding) and each table's Delta snapshot
    brought up to the running driver's newest commit (``DESCRIBE DETAIL`` reads the log, no data file), so a
    take-over replays only the commits after it."""
    from delta.tables import DeltaTable

    cores = spark.sparkContext.defaultParallelism
    task = _worker(job.module)
    spark.range(0, cores, 1, cores).mapInArrow(task, "id long").mapInArrow(task, "id long").collect()
    for target in targets:
        DeltaTable.forPath(spark, str(target.path)).detail().collect()


def _recent_files(job: JobSpec, options: RunOptions) -> list:
    """The files of the stream's newest batch (its newest discovery manifest), as the live path's next batch will
    be: the same number of files, names and sizes; empty when there is none yet."""
    if not job.discovers_files:
        return []
    from spark_jobs.control.checkpoint.store import Location
    from spark_jobs.control.discovery.settings import run_settings
    from spark_jobs.control.discovery.state import DiscoveryLog, DiscoveryStateError

    log_ = DiscoveryLog(Location.of(run_settings(job, options).checkpoint))
    for number in sorted(log_.manifest_ids(), reverse=True)[:5]:  # the newest may be mid-write: one before it
        try:
            manifest = log_.read_manifest(number)
        except DiscoveryStateError:
            continue
        if manifest is not None and manifest.files:
            return list(manifest.files)
    return []
