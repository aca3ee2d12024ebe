"""The one place a SparkSession is configured.

Run by ``python -m spark_jobs`` the session is local (``$SPARK_MASTER``, else ``local[2]``) and gets
the pinned jars of :mod:`spark_jobs.launch.jars` (Delta Lake) from ``.jars/``; run by ``spark-submit`` the
master, the jars (``--jars``) and any ``--conf`` come from spark-submit and are not overridden. Every
session has Delta's SQL extension and catalog, maps the driver JVM's class archive when set-up made one
(:mod:`spark_jobs.launch.class_archive`), and ships the project's code to its executors as a zip
of the code this driver runs (:mod:`spark_jobs.launch.code_zip`), so the same job runs on ``local[2]`` and on a
cluster whose executors do not have the project. All scratch space stays inside the project
(``.spark/``) so killed JVMs leave nothing in ``/tmp``.

Every session, local or under spark-submit, reaches ``s3a://`` (and ``s3://``) paths with the settings of
:func:`spark_jobs.model.object_store.hadoop_conf`, read here from this driver's own environment (the
standard AWS variables and config files): the endpoint and region as S3A settings, the credentials
through the AWS SDK's default chain (never a setting, so never in the Spark UI, a log or a command
line), and Delta's multi-writer log store for S3. Under spark-submit they are applied the same way
(the driver's environment is the submitter's), so nothing about S3 goes into ``--conf``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Iterator

from pyspark.sql import SparkSession

from spark_jobs.launch import class_archive, code_zip
from spark_jobs.launch.jars import DELTA_CONF, spark_jars
from spark_jobs.launch.lineage_listener import with_listener
from spark_jobs.launch.submit import driver_java_options
from spark_jobs.model.lake import PROJECT_ROOT
from spark_jobs.model.object_store import hadoop_conf
from spark_jobs.control.monitoring.prometheus import STREAMING_METRICS_CONF

# Settings every job needs to be correct, whoever launched it.
REQUIRED_CONF = {
    # Event dates are UTC dates, whatever the machine's time zone.
    "spark.sql.session.timeZone": "UTC",
    # A record field of the wrong shape (a string where an object belongs) is NULL alone; without
    # this, Spark's JSON reader would drop the whole record, or the whole file's Records.
    "spark.sql.json.enablePartialResults": "true",
    **DELTA_CONF,
}

# Defaults for a local run; spark-submit --conf wins over these.
LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "256",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
}


DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def snapshot_partitions_per_core(spark: SparkSession) -> None:
    """Delta rebuilds a table's snapshot (after a commit, or when a reader sees a new version) with a
    Spark job of ``spark.databricks.delta.snapshotPartitions`` tasks: its default, 50, costs seconds per
    snapshot on a small machine (~160 tasks per micro-batch and table for a job, measured; 10.9 s per poll
    for a reader of a live table on 2 cores). One task per core, unless spark-submit or extra_conf set it."""
    if spark.conf.get(DELTA_SNAPSHOT_PARTITIONS, None) is None:
        spark.conf.set(DELTA_SNAPSHOT_PARTITIONS, str(max(1, spark.sparkContext.defaultParallelism)))


def under_spark_submit() -> bool:
    """Whether this Python process was started by spark-submit (which owns the JVM's settings)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(app_name: str, *, ui: bool = False, long_running: bool = False,
                  extra_conf: dict[str, str] | None = None) -> SparkSession:
    """The SparkSession for a job or a query.

    :param app_name: the Spark application name (a job's registry name).
    :param ui: start the Spark UI (for long-running jobs), with Spark's streaming metrics served for
        Prometheus on it (:mod:`spark_jobs.control.monitoring.prometheus`; under spark-submit its ``--conf``
        carries them).
    :param long_running: a driver that lives for days (a continuous job's): the JVM's default JIT, not C1 only
        (:mod:`spark_jobs.launch.jit`; under spark-submit, its command line decided).
    :param extra_conf: settings on top of the defaults.
    :raises UsageError: (started locally) when a pinned jar is missing, naming it.
    """
    scratch = PROJECT_ROOT / ".spark"
    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        os.environ.setdefault("SPARK_LOCAL_DIRS", str(scratch / "local"))
        os.makedirs(os.environ["SPARK_LOCAL_DIRS"].split(",")[0], exist_ok=True)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        jars, listener = with_listener(spark_jars(), {})  # the OpenLineage listener, if on
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[2]")).config("spark.jars", jars)
        for key, value in listener.items():
            builder = builder.config(key, value)
        java_options = driver_java_options(long_running)  # the class archive (a faster start), the JIT
        if java_options:
            builder = builder.config(class_archive.DEFAULT_JAVA_OPTIONS_CONF, java_options)
        for key, value in {**LOCAL_DEFAULTS, **(STREAMING_METRICS_CONF if ui else {}),
                           "spark.ui.enabled": str(ui).lower(),
                           "spark.sql.warehouse.dir": str(scratch / "warehouse"),
                           "spark.driver.extraJavaOptions": f"-Dderby.system.home={scratch / 'derby'}"}.items():
            builder = builder.config(key, value)
    for key, value in {**REQUIRED_CONF, **hadoop_conf(), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # Spark's py_files: every executor fetches it from the driver (a path added twice is added once).
    spark.sparkContext.addPyFile(str(code_zip.build()))
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    snapshot_partitions_per_core(spark)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark


@contextlib.contextmanager
def session_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set SQL settings for the duration of a ``with`` block, then put the old values back."""
    old = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


JOB_DESCRIPTION = "spark.job.description"


@contextlib.contextmanager
def job_step(spark: SparkSession, what: str) -> Iterator[None]:
    """Name the Spark jobs this thread starts inside the block ``what`` (first line of their description in
    the Spark UI, above what was there: a streaming batch's query name, id and batch), then put it back."""
    context = spark.sparkContext
    before = context.getLocalProperty(JOB_DESCRIPTION)
    context.setJobDescription(f"{what}\n{before}" if before else what)
    try:
        yield
    finally:
        context.setLocalProperty(JOB_DESCRIPTION, before)


def configure_logging() -> None:
    """Job logs go to stderr; stdout is kept for results."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
