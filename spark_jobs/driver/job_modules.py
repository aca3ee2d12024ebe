"""A job's module and its tables as the driver sees them: the module, the write targets, the schemas.

:func:`job_module` imports ``spark_jobs.jobs.<job>`` and gives what the driver writes from (a
:class:`~spark_jobs.driver.job_contract.JobModule`: the module's ``transform`` and one select per table, the
module's ``OUTPUTS`` or, for a file log type, derived from its declaration, each conformed to its table's declared
schema); :func:`table_targets` turns the registry's tables into write targets;
:func:`output_schemas` gives each table's schema (to create it empty before the first batch); :func:`transform_batch`
computes every table in batch, nothing written (tests, tools).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake
from spark_jobs.model.tables import TableSpec
from spark_jobs.registry import all_tables
from spark_jobs.driver.job_contract import Select
from spark_jobs.driver.source_readers import read_files, read_source, source_schema
from spark_jobs.driver.write.delta_writer import TableTarget, create_tables
from spark_jobs.driver.write.rows import table_rows
from spark_jobs.transforms.conform import conform, table_schema
from spark_jobs.transforms.quarantine import log_type_selects

log = logging.getLogger("spark_jobs")


@dataclass(frozen=True)
class LoadedJob:
    """A job's module as the driver writes from it (a :class:`~spark_jobs.driver.job_contract.JobModule`).

    :param transform: the module's ``transform``.
    :param OUTPUTS: one select per table of the registry entry, in its order; a table that declares a ``schema``
        gets its select's rows conformed to it (its columns, their order and types).
    """

    transform: Callable[[DataFrame, JobSpec], DataFrame]
    OUTPUTS: Mapping[str, Select]


def job_module(job: JobSpec) -> LoadedJob:
    """The job's module (``spark_jobs.jobs.<job>``) as the driver writes from it: its ``transform`` and its selects
    (a file log type's from its registry entry: :func:`~spark_jobs.transforms.quarantine.log_type_selects`).

    :raises ValueError: for a module without a select for one of the job's tables, or a file log type's module
        that declares selects of its own, naming the module and the fix.
    """
    module = importlib.import_module(job.module)
    selects = getattr(module, "OUTPUTS", None)
    if job.log_type is not None:
        if selects is not None:
            raise ValueError(f"job {job.name} is a file log type: its selects come from its registry entry; drop "
                             f"OUTPUTS from {job.module}")
        selects = log_type_selects(job.log_type)
    elif selects is None:
        raise ValueError(f"job {job.name}: {job.module} has no OUTPUTS; give it one select per table, or declare the "
                         "job with file_log_type() when it is a log of files with events and a quarantine")
    missing = [t.name for t in job.tables if t.name not in selects]
    if missing:
        raise ValueError(f"job {job.name}: {job.module}.OUTPUTS has no select for table {missing[0]}; give it one "
                         "(keyed by the table's name, in the registry's order)")
    return LoadedJob(module.transform, MappingProxyType({t.name: _conforming(selects[t.name], t) for t in job.tables}))


def _conforming(select: Select, table: TableSpec) -> Select:
    """``select``, its rows conformed to ``table``'s declared schema when it declares one."""
    if table.schema is None:
        return select
    schema = table_schema(table.schema)

    def conformed(rows: DataFrame, context=None) -> DataFrame:
        return conform(select(rows, context), schema)

    return conformed


def table_targets(job: JobSpec, lake: Lake) -> list[TableTarget]:
    """The job's tables as write targets: path, partitions, keys, route and delivery-date bound (the registry's)."""
    return [TableTarget(t.name, lake.table_path(t.name), t.partition_by, t.unique_key, t.first_by, t.null_safe,
                        t.stats_columns, t.write_mode, route=t.route, delivery_date_bound=t.delivery_date_bound,
                        delivery_time_bound=t.delivery_time_bound)
            for t in job.tables]


def output_schemas(spark: SparkSession, job: JobSpec) -> dict[str, StructType]:
    """Each output table's schema: the registry's ``schema`` when declared, else what the job's select gives
    for its transform of an empty frame of the source's schema (no data is read; a stateless job reading a Delta
    table: that table's schema, as its own job derives it).

    :raises ValueError: for a table with neither (a source without a fixed schema, or a stateful job).
    """
    schemas = {t.name: table_schema(t.schema) for t in job.tables if t.schema is not None}
    undeclared = [t for t in job.tables if t.schema is None]
    if undeclared:
        schema = source_schema(job)
        if schema is None and job.source.kind == "delta" and not job.stateful:  # the source table's, as its job makes it
            producer, _ = all_tables()[job.source.table]
            schema = output_schemas(spark, producer)[job.source.table]
        if schema is None or job.stateful:
            raise ValueError(f"job {job.name}, table {undeclared[0].name}: declare its schema in the registry "
                             f"(its rows cannot be derived from {job.source.describe()} without data)")
        module = job_module(job)
        parsed = module.transform(spark.createDataFrame([], schema), job)
        schemas.update({t.name: table_rows(module, t, parsed).schema for t in undeclared})
    return {t.name: schemas[t.name] for t in job.tables}


def transform_batch(spark: SparkSession, job: JobSpec, input_path: Path) -> dict[str, DataFrame]:
    """Every table of ``job`` computed in batch from the files (or source table) in ``input_path`` (nothing written)."""
    module = job_module(job)
    if job.stateful:
        from spark_jobs.driver.write.stateful import batch_outputs

        source = read_source(spark, job, input_path, dict(job.file_source_options), streaming=False)
        return batch_outputs(spark, job, module, source)
    parsed = module.transform(read_files(spark, job, input_path, dict(job.file_source_options), streaming=False), job)
    return {t.name: table_rows(module, t, parsed) for t in job.tables}


def prepare_source(spark: SparkSession, job: JobSpec, input_path: Path) -> None:
    """Create a Delta source table that does not exist yet (empty, as its producer creates it)."""
    if job.source.kind != "delta" or (Path(input_path) / "_delta_log").is_dir():
        return
    producer, _ = all_tables()[job.source.table]
    target = next(t for t in table_targets(producer, Lake(Path(input_path).parent)) if t.name == job.source.table)
    log.info("source table %s does not exist yet at %s: creating it empty (its producer %s fills it)",
             job.source.table, input_path, producer.name)
    create_tables(spark, [replace(target, path=Path(input_path))],
                  {job.source.table: output_schemas(spark, producer)[job.source.table]})
