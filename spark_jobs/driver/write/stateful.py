"""Write each micro-batch of a stateful job's result to its tables, exactly once.

A stateful job's ``transform`` runs on the stream (its aggregation or ``transformWithStateInPandas``
keeps state in the checkpoint); ``foreachBatch`` hands this module each micro-batch of its result.
For every table, the job module's ``OUTPUTS[table](result, context)`` picks the table's rows, and
:class:`~spark_jobs.driver.write.delta_writer.ExactlyOnceWriter` commits them in one Delta transaction marked
``txnAppId = "<query id>:<table>"``, ``txnVersion = <batch id>`` by the table's write mode (insert,
upsert, complete). A batch re-run after a crash has the same input and the same state version, so
it computes the same rows, and Delta skips the tables that already hold it.

:class:`BatchContext` is what a batch's rows may depend on besides its input, all of it the same
when the batch is re-run:

- ``late_watermark_ms``: the watermark Spark drops late input by in this batch, the *previous*
  batch's ``batchWatermarkMs`` (read from the checkpoint's ``offsets/<batch - 1>``; 0 for batch 0);
- ``batch_time``: when Spark planned the batch (``batchTimestampMs`` of ``offsets/<batch>``), the
  ``updated_at``/``detected_at`` of its rows;
- ``dimensions``: each reference file as read for this batch (see :mod:`spark_jobs.driver.dimensions`;
  a re-run reads the file as it is then);
- ``settings``: the job's settings (registry, ``$<JOB>_SETTINGS``);
- ``source_batch()``: for a job reading a Delta table, the rows this micro-batch read from it: the
  data files between the offsets ``offsets/<batch - 1>`` and ``offsets/<batch>`` of the checkpoint, as
  Delta's source admits them (:func:`spark_jobs.control.checkpoint.delta_source.batch_input`). A stateful
  query's result no longer holds its input, and a second branch reading the table would be a second
  source with offsets of its own; the same offsets give the same files when the batch is re-run.

In batch mode (:func:`batch_outputs`) nothing is late and ``batch_time`` is now.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_jobs.driver.dimensions import DimensionReader, dimension_frame
from spark_jobs.driver.job_contract import BatchContext
from spark_jobs.control.checkpoint.logs import LogDamage, OffsetsEntry, parse_offsets, read_checked, scan_log_dir
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.streams import DeltaTableSource, job_settings
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, TableTarget

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import JobModule

log = logging.getLogger("spark_jobs")


def offsets_entry(checkpoint: Path | str, batch_id: int) -> OffsetsEntry | None:
    """``offsets/<batch_id>`` of the checkpoint, or ``None`` when there is none."""
    log_dir = scan_log_dir(Location.of(str(checkpoint)).child("offsets"))
    if batch_id not in log_dir.batches:
        return None
    return parse_offsets(read_checked(log_dir, batch_id))


def batch_timing(checkpoint: Path | str, batch_id: int) -> tuple[int, datetime]:
    """The late-data watermark (ms) and the planned time of micro-batch ``batch_id``, from the checkpoint.

    :raises LogDamage: when the batch's own offsets file is missing or damaged (Spark wrote it before
        running the batch, so this cannot happen for a running batch).
    """
    current = offsets_entry(checkpoint, batch_id)
    if current is None:
        raise LogDamage(f"offsets/{batch_id} of {checkpoint} is missing while batch {batch_id} runs")
    previous = offsets_entry(checkpoint, batch_id - 1) if batch_id > 0 else None
    watermark = previous.watermark_ms if previous is not None else 0
    return watermark, datetime.fromtimestamp(current.timestamp_ms / 1000, timezone.utc)


class StatefulBatchWriter:
    """Writes micro-batches of a stateful job's result (``foreachBatch``).

    :param job: the registry entry.
    :param module: the job module (its ``OUTPUTS``).
    :param targets: the job's tables.
    :param writer: the exactly-once Delta writer (its app id is the checkpoint's query id).
    :param checkpoint: the query's checkpoint folder (for the batch's watermark and time).
    :param source_path: the source's folder (a Delta table's, for ``source_batch``).
    """

    def __init__(self, job: JobSpec, module: JobModule, targets: list[TableTarget], writer: ExactlyOnceWriter,
                 checkpoint: Path | str, source_path: Path | str | None = None):
        self.job = job
        self.source_path = source_path
        self.module = module
        self.targets = targets
        self.writer = writer
        self.checkpoint = checkpoint
        self.settings = job_settings(job.name, job.settings)
        self.readers = [DimensionReader(spec) for spec in job.dimensions]

    def context(self, spark: SparkSession, batch_id: int) -> BatchContext:
        watermark, planned = batch_timing(self.checkpoint, batch_id)
        dimensions = {reader.spec.name: dimension_frame(spark, reader.read()) for reader in self.readers}
        source = None
        if isinstance(self.job.source, DeltaTableSource) and self.source_path is not None:
            skip = str(self.job.file_source_options.get("skipChangeCommits", "false")).lower() == "true"

            def source():
                return delta_batch_rows(spark, self.source_path, self.checkpoint, batch_id, skip)

        return BatchContext(spark, self.job, batch_id, watermark, planned, dimensions, self.settings, source)

    def write(self, result: DataFrame, batch_id: int) -> tuple[int | None, dict[str, int]]:
        """Write micro-batch ``batch_id`` of the query's result to every table.

        :returns: ``None`` (the batch's input rows live in the state: the query's progress counts them) and
            the rows written per table (0 for a table that already held this batch).
        """
        context = self.context(result.sparkSession, batch_id)
        return write_outputs(self.module, self.targets, result, context, self.writer)


def delta_batch_rows(spark: SparkSession, table: Path | str, checkpoint: Path | str, batch_id: int,
                     skip_change_commits: bool) -> DataFrame:
    """The rows micro-batch ``batch_id`` read from the Delta table at ``table`` (its data columns; the
    partition columns of files read one by one are not in them)."""
    from urllib.parse import unquote

    from spark_jobs.control.checkpoint.delta_source import batch_input, delta_source_offset

    def offset(batch: int):
        entry = offsets_entry(checkpoint, batch) if batch >= 0 else None
        return delta_source_offset(entry.sources[0]) if entry is not None else None

    end = offset(batch_id)
    if end is None:
        raise LogDamage(f"offsets/{batch_id} of {checkpoint} holds no Delta source offset")
    read = batch_input(Location.of(str(table)), offset(batch_id - 1), end, skip_change_commits)
    whole = spark.read.format("delta").load(str(table))
    from deltalake import DeltaTable

    partitions = set(DeltaTable(str(table), storage_options=delta_rs_options(table)).metadata().partition_columns)
    columns = [f.name for f in whole.schema.fields if f.name not in partitions]
    frames = []
    if read.snapshot_version is not None:
        frames.append(spark.read.format("delta").option("versionAsOf", read.snapshot_version).load(str(table))
                      .select(*columns))
    if read.files:
        data = StructType([f for f in whole.schema.fields if f.name in columns])
        frames.append(spark.read.schema(data).parquet(*[f"{table}/{unquote(path)}" for path in read.files]))
    if not frames:
        return spark.createDataFrame([], whole.select(*columns).schema)
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def write_outputs(module: JobModule, targets: list[TableTarget], result: DataFrame, context: BatchContext,
                  writer: ExactlyOnceWriter) -> tuple[None, dict[str, int]]:
    """Each table's rows of ``result`` (``OUTPUTS[table](result, context)``) committed by ``writer``.

    A table with no rows gets no commit, except a ``complete`` table (an empty result empties it).
    """
    from pyspark.sql import functions as F

    result = result.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows: dict[str, int] = {}
        for target in targets:
            out = module.OUTPUTS[target.name](result, context).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                # One pass: the rows, and the partition values that bound a MERGE.
                stats = out.agg(F.count(F.lit(1)).alias("rows"),
                                *[F.collect_set(column).alias(column) for column in target.prune_by]).first()
                if not stats["rows"] and target.write_mode != "complete":
                    rows[target.name] = 0
                    continue
                prune = {column: stats[column] for column in target.prune_by}
                rows[target.name] = writer.write(context.batch_id, target.name, out, prune, rows=stats["rows"])
            finally:
                out.unpersist()
    finally:
        result.unpersist()
    return None, rows


def batch_outputs(spark: SparkSession, job: JobSpec, module: JobModule, source: DataFrame) -> dict[str, DataFrame]:
    """Every table of a stateful job computed in batch from ``source`` (nothing is late, nothing written)."""
    result = module.transform(source, job)
    dimensions = {spec.name: dimension_frame(spark, DimensionReader(spec).read()) for spec in job.dimensions}
    context = BatchContext(spark, job, None, None, datetime.now(timezone.utc), dimensions,
                           job_settings(job.name, job.settings))
    return {name: select(result, context) for name, select in module.OUTPUTS.items()}
