"""Reading a job's input: the registry's sources (:mod:`spark_jobs.model.streams`), streaming or batch.

- a ``binaryFile`` :class:`~spark_jobs.model.streams.FileSource` with a key layout, as a stream: the landing
  source (:mod:`spark_jobs.driver.landing_source`: one row per file, ``path``, ``content``, ..., found by a
  listing of the window only, or by S3 event notifications); read once (batch): Spark's ``binaryFile``;
- a ``binaryFile`` file source without a key layout: Spark's ``binaryFile`` source over the landing folder;
- a :class:`~spark_jobs.model.streams.DeltaTableSource`: Delta's streaming source over the table's folder
  (every commit after the checkpoint's offset; a first run reads the table's snapshot, then each new
  commit), or a batch read of its newest version;
- a ``text`` :class:`~spark_jobs.model.streams.FileSource`: Spark's text file source, one row per line;
- a :class:`~spark_jobs.model.streams.KafkaSource`: Spark's Kafka source (:mod:`spark_jobs.driver.kafka`); the
  "input path" is the topic spec (``a,b`` or ``pattern:<regex>``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.streams import DeltaTableSource, KafkaSource

if TYPE_CHECKING:
    from spark_jobs.model.runs import RunOptions

log = logging.getLogger("spark_jobs")

BINARY_FILE_SCHEMA = StructType([
    StructField("path", StringType()), StructField("modificationTime", TimestampType()),
    StructField("length", LongType()), StructField("content", BinaryType()),
])

# Options only a stream has; a batch read refuses or ignores them.
STREAM_ONLY = ("maxFilesPerTrigger", "maxBytesPerTrigger", "latestFirst", "skipChangeCommits", "maxFileAge",
               "startingVersion", "startingTimestamp")


def source_schema(job: JobSpec) -> StructType | None:
    """The fixed schema of the job's source rows (``binaryFile`` files, Kafka messages), on which its transform
    can run without data; ``None`` for a source whose schema is its data's (a Delta table, text)."""
    if isinstance(job.source, KafkaSource):
        from spark_jobs.driver.kafka import KAFKA_SCHEMA

        return KAFKA_SCHEMA
    return BINARY_FILE_SCHEMA if job.source.whole_files else None


def read_files(spark: SparkSession, job: JobSpec, input_path: Path, options: dict[str, str],
               streaming: bool) -> DataFrame:
    """Spark's binaryFile source over the landing folder, streaming or batch."""
    if streaming:
        reader = spark.readStream.format("binaryFile").schema(BINARY_FILE_SCHEMA)
    else:
        reader = spark.read.format("binaryFile")
        options = {k: v for k, v in options.items() if k not in ("maxFilesPerTrigger", "latestFirst")}
    return reader.options(**options).load(str(input_path))


def read_input(spark: SparkSession, job: JobSpec, options: "RunOptions", streaming: bool) -> DataFrame:
    """The job's source (the registry's ``source``) over ``options.input_path``, streaming or batch."""
    from spark_jobs.control.discovery.settings import run_settings

    if streaming and job.discovers_files:
        return read_landing(spark, run_settings(job, options, spark.sparkContext.defaultParallelism))
    if job.source.whole_files:
        return read_files(spark, job, options.input_path, options.file_source_options, streaming)
    return read_source(spark, job, options.input_path, options.file_source_options, streaming)


def read_landing(spark: SparkSession, settings) -> DataFrame:
    """The landing source (:mod:`spark_jobs.driver.landing_source`) as a stream, discovering files by ``settings``
    (:class:`~spark_jobs.control.discovery.settings.DiscoverySettings`)."""
    from spark_jobs.driver import landing_source

    landing_source.register(spark)
    return spark.readStream.format(landing_source.NAME).options(**settings.to_options()).load()


def read_file_list(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Exactly the files ``paths`` (as ``binaryFile`` names them), read once by Spark's ``binaryFile`` source."""
    return spark.read.format("binaryFile").load(paths)


def read_source(spark: SparkSession, job: JobSpec, input_path: Path, options: dict[str, str],
                streaming: bool) -> DataFrame:
    """The job's source over ``input_path``, streaming or batch.

    :raises ValueError: for a source kind this module does not read.
    """
    if isinstance(job.source, KafkaSource):
        from spark_jobs.driver.kafka import read_kafka

        return read_kafka(spark, job, str(input_path), options, streaming)
    if not streaming:
        options = {k: v for k, v in options.items() if k not in STREAM_ONLY}
    reader = (spark.readStream if streaming else spark.read).options(**options)
    if isinstance(job.source, DeltaTableSource):
        return reader.format("delta").load(str(input_path))
    if job.source.format == "text":
        return reader.text(str(input_path))
    raise ValueError(f"job {job.name}: no reader for {job.source.describe()}")
