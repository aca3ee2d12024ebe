"""Write one micro-batch to several tables, each exactly once.

Spark has no public API that commits one micro-batch to two file sinks: a streaming query has one
sink, and ``foreachBatch`` writes are at-least-once. Two queries would read and parse every file
twice. So for ``parquet`` each table gets Spark's own ``FileStreamSink`` (the class behind
``writeStream.format("parquet")``), driven from ``foreachBatch``: it writes the batch's files and then
records them atomically in the table's ``_spark_metadata`` log, and it skips a batch id that log
already holds. A batch re-run after a crash therefore adds nothing twice, and Spark readers see only
committed files. For ``delta`` the same guarantee comes from Delta's idempotent writes
(``txnAppId``/``txnVersion``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.errors import UsageError

TABLE_FORMATS = ("parquet", "delta")

DELTA_JARS = ("io.delta:delta-spark_4.2_2.13:4.4.1", "io.delta:delta-storage:4.4.1")
DELTA_CLASS = "org.apache.spark.sql.delta.DeltaLog"


def check_table_format(spark: SparkSession, table_format: str) -> None:
    """Fail before any work if ``table_format`` is unknown or its jars are not on the classpath.

    :raises UsageError: naming the format, or the missing jars and how to provide them.
    """
    if table_format not in TABLE_FORMATS:
        raise UsageError(f"unknown table format {table_format!r}; use one of: {', '.join(TABLE_FORMATS)}")
    if table_format == "delta":
        try:
            spark._jvm.java.lang.Class.forName(DELTA_CLASS)
        except Exception:
            raise UsageError(
                "table format 'delta' needs the Delta Lake jars on Spark's classpath, and they are not "
                f"there (class {DELTA_CLASS} not found): {' and '.join(DELTA_JARS)}. The pip package "
                "delta-spark is only the Python half. Fetch the two jars where Maven Central is "
                "reachable and pass them with spark-submit --jars A.jar,B.jar (or copy them into "
                "pyspark's jars/ folder), with --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension "
                "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog; "
                "or use --table-format parquet"
            ) from None


@dataclass(frozen=True)
class TableTarget:
    """Where and how one table is written.

    :param name: the table's name.
    :param path: its folder.
    :param partition_by: partition columns.
    """

    name: str
    path: Path
    partition_by: tuple[str, ...]


class ExactlyOnceWriter:
    """Appends each micro-batch to every target table at most once per batch id.

    :param spark: the job's session.
    :param targets: the tables.
    :param table_format: ``parquet`` or ``delta``.
    :param app_id: a stable id of the stream (Delta's ``txnAppId``); the checkpoint's query id.
    """

    def __init__(self, spark: SparkSession, targets: list[TableTarget], table_format: str, app_id: str):
        self._spark = spark
        self._targets = {t.name: t for t in targets}
        self._format = table_format
        self._app_id = app_id
        self._sinks = {}

    def _file_sink(self, target: TableTarget):
        if target.name not in self._sinks:
            jvm = self._spark._jvm
            utils = jvm.org.apache.spark.api.python.PythonUtils
            self._sinks[target.name] = jvm.org.apache.spark.sql.execution.streaming.sinks.FileStreamSink(
                self._spark._jsparkSession,
                str(target.path),
                jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat(),
                utils.toSeq(list(target.partition_by)),
                utils.toScalaMap({}),
            )
        return self._sinks[target.name]

    def write(self, batch_id: int, table: str, frame: DataFrame) -> None:
        """Append ``frame`` to ``table`` as micro-batch ``batch_id``, unless already committed."""
        target = self._targets[table]
        if self._format == "parquet":
            self._file_sink(target).addBatch(batch_id, frame._jdf)
        else:
            (frame.write.format("delta").mode("append").partitionBy(*target.partition_by)
             .option("txnAppId", f"{self._app_id}:{table}").option("txnVersion", batch_id)
             .save(str(target.path)))
