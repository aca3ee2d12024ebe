"""Reading a job's input: the registry's sources (:mod:`spark_jobs.model.streams`), streaming or batch.

- a ``binaryFile`` :class:`~spark_jobs.model.streams.FileSource`: Spark's ``binaryFile`` source over the
  landing folder (one row per file: ``path``, ``content``, ...), with the delivery date and time of a
  file from its path (:func:`file_date_column`, :func:`file_time_column`) for backfills' filters;
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

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from spark_jobs.model.jobs import JobSpec

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
    if job.source.kind == "kafka":
        from spark_jobs.driver.kafka import KAFKA_SCHEMA

        return KAFKA_SCHEMA
    if job.source.kind == "files" and job.source.format == "binaryFile":
        return BINARY_FILE_SCHEMA
    return None


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
    if job.source.kind == "files" and job.source.format == "binaryFile":
        return read_files(spark, job, options.input_path, options.file_source_options, streaming)
    return read_source(spark, job, options.input_path, options.file_source_options, streaming)


def file_date_column(path: Column) -> Column:
    """A file's delivery date from its path, as :func:`spark_jobs.control.backfill.file_date` computes it: the
    timestamp in the object name, else the ``YYYY/MM/DD`` folders above it; NULL when neither is a date."""
    from spark_jobs.control.backfill import NAME_DATE

    named = F.try_to_date(F.nullif(F.regexp_extract(path, NAME_DATE + "[^/]*$", 1), F.lit("")), "yyyyMMdd")
    return F.coalesce(named, _folder_date_column(path))


def _folder_date_column(path: Column) -> Column:
    """The date of a file's ``YYYY/MM/DD`` folders, NULL when they are not a date."""
    from spark_jobs.control.backfill import FOLDER_DATE

    parts = (F.nullif(F.regexp_extract(path, FOLDER_DATE, g), F.lit("")) for g in (1, 2, 3))
    return F.try_to_date(F.concat_ws("-", *parts), "yyyy-MM-dd")


def file_time_column(path: Column) -> Column:
    """A file's delivery time (UTC) from its path, as :func:`spark_jobs.control.backfill.file_time` computes it: the
    object name's ``YYYYMMDDTHHMMZ``, else midnight of the ``YYYY/MM/DD`` folders; NULL with neither."""
    from spark_jobs.control.backfill import NAME_TIME

    named = F.try_to_timestamp(F.nullif(F.regexp_extract(path, NAME_TIME + "[^/]*$", 1), F.lit("")),
                               F.lit("yyyyMMdd'T'HHmm"))
    return F.coalesce(named, _folder_date_column(path).cast("timestamp"))


def read_source(spark: SparkSession, job: JobSpec, input_path: Path, options: dict[str, str],
                streaming: bool) -> DataFrame:
    """The job's source over ``input_path``, streaming or batch.

    :raises ValueError: for a source kind this module does not read.
    """
    if job.source.kind == "kafka":
        from spark_jobs.driver.kafka import read_kafka

        return read_kafka(spark, job, str(input_path), options, streaming)
    if not streaming:
        options = {k: v for k, v in options.items() if k not in STREAM_ONLY}
    reader = (spark.readStream if streaming else spark.read).options(**options)
    if job.source.kind == "delta":
        return reader.format("delta").load(str(input_path))
    if job.source.format == "text":
        return reader.text(str(input_path))
    raise ValueError(f"job {job.name}: no reader for {job.source.describe()}")
