"""The openlineage-spark listener, off unless ``SPARK_JOBS_LINEAGE_LISTENER=on`` (docs/lineage.md says why).

The drivers report their runs themselves (:mod:`spark_jobs.driver.lineage`): the listener cannot see the raw
tables' staged inserts (Delta's transaction API inside ``foreachBatch``) and reports a streaming query as a
START/COMPLETE pair per micro-batch. Turned on, it adds what it sees (each micro-batch's Spark SQL executions,
their reads, the column lineage of the MERGEs) beside the drivers' own events: the pinned jar
(:data:`spark_jobs.launch.jars.OPENLINEAGE_SPARK`) on the classpath, the listener registered, its file transport
into ``<lake>/_lineage/listener/events.jsonl`` (or OpenLineage's HTTP transport when ``$OPENLINEAGE_URL`` is set), the
jobs' namespace, and the parent the submit carried (the ``spark.openlineage.parent*`` settings, read by the
listener itself).
"""

from __future__ import annotations

import os
from typing import Mapping

from spark_jobs.launch.jars import OPENLINEAGE_SPARK, jars_dir

LISTENER_ENV = "SPARK_JOBS_LINEAGE_LISTENER"
LISTENER_CLASS = "io.openlineage.spark.agent.OpenLineageSparkListener"


def listener_enabled(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(LISTENER_ENV, "").strip().lower() in {"on", "true", "1"}


def listener_jar() -> str:
    """The pinned listener jar's path (no I/O)."""
    return str(jars_dir() / OPENLINEAGE_SPARK.file_name)


def with_listener(jars: str, conf: Mapping[str, str],
                  environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """``jars`` and ``conf`` with the listener's jar and settings added when it is turned on (its events in the lake
    of ``$LAKE_ROOT``, else ``./lake``), else as they are. No I/O: safe while Airflow parses a DAG file."""
    environ = os.environ if environ is None else environ
    if not listener_enabled(environ):
        return jars, dict(conf)
    lake = environ.get("LAKE_ROOT") or "lake"
    lake = lake if "://" in lake else os.path.abspath(lake)
    return f"{jars},{listener_jar()}" if jars else listener_jar(), {**conf, **listener_conf(lake, environ)}


def listener_conf(lake_root: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The listener's Spark settings (without the jar): registered, its transport, the jobs' namespace."""
    environ = os.environ if environ is None else environ
    if environ.get("OPENLINEAGE_URL"):
        transport = {"type": "http", "url": environ["OPENLINEAGE_URL"],
                     "endpoint": environ.get("OPENLINEAGE_ENDPOINT") or "api/v1/lineage"}
    else:
        transport = {"type": "file", "location": f"{str(lake_root).rstrip('/')}/_lineage/listener/events.jsonl"}
    transport = {f"spark.openlineage.transport.{key}": value for key, value in transport.items()}
    return {"spark.extraListeners": LISTENER_CLASS,
            "spark.openlineage.namespace": environ.get("OPENLINEAGE_NAMESPACE") or "spark_jobs", **transport}
