"""Warm a new driver's write path while its query starts, so that its first micro-batch is not a cold one.

A driver's first micro-batch is much slower than a warm one (``bench --only cold_start``; docs/benchmarks.md):
on top of its own work it starts Spark's Python workers (a fork of ``pyspark.daemon``, then each worker
imports pyarrow, simdjson and the job's decoding), loads each Delta table's snapshot for the first time
(the log's checkpoint and commits) and loads and compiles the classes of both. None of that
needs the batch: :func:`start` does it on a daemon thread while the main thread creates the tables and
starts the streaming query (checkpoint, offsets, the first listing), on a machine whose cores wait for
the driver then. What it loads stays: Spark reuses an idle Python worker for the batch's tasks, and Delta
keeps each table's snapshot in its log cache and only reads the commits made since. It does not compute a
snapshot's state (its files, a Spark job): a live batch reads what it needs of the log with delta-rs
(:mod:`~spark_jobs.driver.write.held_files`), and that job would take the cores from the first batch.

It writes nothing and may fail quietly (the batch then does the same work itself); the batch never waits
for it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Iterator

from pyspark.sql import SparkSession

if TYPE_CHECKING:
    from spark_jobs.driver.write.delta_writer import TableTarget

log = logging.getLogger("spark_jobs")


def _python_worker(batches: Iterator) -> Iterator:
    """A Python worker's first task: import what the job's decoding imports, give back nothing."""
    import pyarrow  # noqa: F401
    import simdjson  # noqa: F401

    from spark_jobs.transforms import arrow_without_pandas
    from spark_jobs.transforms.cloudtrail import decode  # noqa: F401

    arrow_without_pandas.settle()

    for _ in batches:
        pass
    return iter(())


def warm_up(spark: SparkSession, targets: list["TableTarget"]) -> None:
    """Start a Python worker and load each target table's Delta snapshot (the work of :func:`start`'s thread)."""
    started = time.monotonic()
    spark.range(1).mapInArrow(_python_worker, "id long").collect()
    jvm = spark._jvm
    none = jvm.scala.Option.apply(None)
    for target in targets:  # the snapshot (its log segment, protocol and metadata), which a transaction starts from
        jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(target.path)).update(
            False, none, none)
    log.info("write path warmed up in %.1f s (a Python worker, %d tables' snapshots)", time.monotonic() - started,
             len(targets))


def start(spark: SparkSession, targets: list["TableTarget"]) -> threading.Thread:
    """Run :func:`warm_up` on a daemon thread (its errors are logged, never raised)."""

    def run() -> None:
        try:
            warm_up(spark, targets)
        except Exception as exc:  # noqa: BLE001 - the first batch then does this work itself
            log.info("warming up the write path did not finish: %s", str(exc).strip().splitlines()[0][:200])

    thread = threading.Thread(target=run, name="write-path-warm-up", daemon=True)
    thread.start()
    return thread
