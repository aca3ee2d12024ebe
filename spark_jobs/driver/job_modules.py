"""A job's module and its tables as the driver sees them: the module, the write targets, the schemas.

:func:`job_module` imports ``spark_jobs.jobs.<job>`` (its ``transform`` and ``OUTPUTS``, see
:mod:`spark_jobs.jobs`); :func:`table_targets` turns the registry's tables into write targets;
:func:`output_schemas` gives each table's schema (to create it empty before the first batch);
:func:`transform_batch` computes every table in batch, nothing written (tests, tools).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake
from spark_jobs.registry import all_tables
from spark_jobs.driver.source_readers import BINARY_FILE_SCHEMA, read_files, read_source
from spark_jobs.driver.write.delta_writer import TableTarget, create_tables

log = logging.getLogger("spark_jobs")


def job_module(job: JobSpec) -> ModuleType:
    """The module with the job's ``transform`` and ``OUTPUTS``."""
    return importlib.import_module(job.module)


def table_targets(job: JobSpec, module: ModuleType, lake: Lake) -> list[TableTarget]:
    """The job's tables as write targets: path, partitions, and the job module's unique keys."""
    keys, first_by = getattr(module, "UNIQUE_KEYS", {}), getattr(module, "FIRST_BY", {})
    null_safe = getattr(module, "NULL_SAFE_KEYS", {})
    return [TableTarget(t.name, lake.table_path(t.name), t.partition_by, tuple(keys.get(t.name, ())),
                        tuple(first_by.get(t.name, ())), tuple(null_safe.get(t.name, ())), t.stats_columns,
                        t.write_mode)
            for t in job.tables]


def transform_batch(spark: SparkSession, job: JobSpec, input_path: Path) -> dict[str, DataFrame]:
    """Every table of ``job`` computed in batch from the files (or source table) in ``input_path`` (nothing written)."""
    module = job_module(job)
    if job.stateful:
        from spark_jobs.driver.write.stateful import batch_outputs
        source = read_source(spark, job, input_path, dict(job.file_source_options), streaming=False)
        return batch_outputs(spark, job, module, source)
    parsed = module.transform(read_files(spark, job, input_path, dict(job.file_source_options), streaming=False))
    return {name: select(parsed) for name, select in module.OUTPUTS.items()}


def output_schemas(spark: SparkSession, job: JobSpec) -> dict[str, StructType]:
    """Each output table's schema: the job module's ``TABLE_SCHEMAS``, else from the transform itself
    (no data is read)."""
    module = job_module(job)
    if hasattr(module, "TABLE_SCHEMAS"):
        return dict(module.TABLE_SCHEMAS)
    parsed = module.transform(spark.createDataFrame([], getattr(module, "SOURCE_SCHEMA", BINARY_FILE_SCHEMA)))
    return {name: select(parsed).schema for name, select in module.OUTPUTS.items()}


def prepare_source(spark: SparkSession, job: JobSpec, input_path: Path) -> None:
    """Create a Delta source table that does not exist yet (empty, as its producer creates it)."""
    if job.source.kind != "delta" or (Path(input_path) / "_delta_log").is_dir():
        return
    producer, _ = all_tables()[job.source.table]
    target = next(t for t in table_targets(producer, job_module(producer), Lake(Path(input_path).parent))
                  if t.name == job.source.table)
    log.info("source table %s does not exist yet at %s: creating it empty (its producer %s fills it)",
             job.source.table, input_path, producer.name)
    create_tables(spark, [replace(target, path=Path(input_path))],
                  {job.source.table: output_schemas(spark, producer)[job.source.table]})
