"""The readers of the registry's sources (:mod:`spark_jobs.model.streams`) other than ``binaryFile`` files.

- a :class:`~spark_jobs.model.streams.DeltaTableSource`: Delta's streaming source over the table's folder
  (every commit after the checkpoint's offset; a first run reads the table's snapshot, then each new
  commit), or a batch read of its newest version. A source table that does not exist yet is created
  empty with its producer's schema, so a consumer may start before its producer ever ran.
- a ``text`` :class:`~spark_jobs.model.streams.FileSource`: Spark's text file source, one row per line.
- a :class:`~spark_jobs.model.streams.KafkaSource`: Spark's Kafka source (:mod:`spark_jobs.driver.kafka`); the
  "input path" is the topic spec (``a,b`` or ``pattern:<regex>``).

(``binaryFile`` files stay with :func:`spark_jobs.driver.runner.read_files`.)
"""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.model.jobs import JobSpec

from spark_jobs.registry import all_tables

log = logging.getLogger("spark_jobs")

# Options only a stream has; a batch read refuses or ignores them.
STREAM_ONLY = ("maxFilesPerTrigger", "maxBytesPerTrigger", "latestFirst", "skipChangeCommits", "maxFileAge",
               "startingVersion", "startingTimestamp")


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


def prepare_source(spark: SparkSession, job: JobSpec, input_path: Path) -> None:
    """Create a Delta source table that does not exist yet (empty, as its producer creates it)."""
    if job.source.kind != "delta" or (Path(input_path) / "_delta_log").is_dir():
        return
    from dataclasses import replace

    from spark_jobs.model.lake import Lake
    from spark_jobs.driver.runner import job_module, output_schemas, table_targets
    from spark_jobs.driver.write.delta_writer import create_tables

    producer, _ = all_tables()[job.source.table]
    target = next(t for t in table_targets(producer, job_module(producer), Lake(Path(input_path).parent))
                  if t.name == job.source.table)
    log.info("source table %s does not exist yet at %s: creating it empty (its producer %s fills it)",
             job.source.table, input_path, producer.name)
    create_tables(spark, [replace(target, path=Path(input_path))],
                  {job.source.table: output_schemas(spark, producer)[job.source.table]})
