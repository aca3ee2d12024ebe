"""The cached plan: parse a file batch once into the batch's cache, count it, then write each table from it.

The general shape of a stateless micro-batch, and what the pipelined pass
(:mod:`spark_jobs.driver.write.pipelined`) leaves: the parse is kept (memory, spilling to disk) for the
batch; one pass over it counts each table's rows and collects the partition values a merge is
bounded by (the batch's event dates), then each table with rows gets one Delta commit from it. A
table with no rows in this batch gets no commit (Delta's idempotent writes do not need one per batch).
Filling and re-reading the cache costs about as much as the parse itself, which is why the
pipelined pass goes first when it can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.jobs import JobSpec
from spark_jobs.driver.session import job_step
from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, TableTarget
from spark_jobs.driver.write.rows import route_column, table_rows

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import JobModule

# The first lines of the Spark jobs' descriptions of a batch written from its cache (the Spark UI; the benchmark's
# profile).
STEP_PARSE = "parse into the batch's cache, count rows and dates"
STEP_WRITE = "write "
STEP_COUNT = "count the batch's files"


@dataclass
class CachedWrite:
    """What the cached plan wrote.

    :param rows: rows inserted per table (0 for a table that already held this batch, or in ``done``).
    :param carried: rows the parsed files carried per table (before deduplication).
    """

    rows: dict[str, int] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)


def write_cached(module: JobModule, job: JobSpec, writer: ExactlyOnceWriter, targets: list[TableTarget],
                 files: DataFrame, batch_id: int, *, rest_table: str | None = None,
                 done: tuple[str, ...] = (), counted: dict[str, int] | None = None) -> CachedWrite:
    """Write ``files`` to every table not in ``done``, from one cached parse.

    :param rest_table: the table whose commit goes under the writer's second series (``:rest``): it holds
        this batch's first commit already (the pipelined pass's, or a run's before a crash).
    :param done: tables the pipelined pass wrote whole (counted, not written).
    :param counted: rows per table that ``files`` carry, when the pipelined pass's observation counted them
        already. When no table left to write needs partition values to bound its MERGE (a batch's
        quarantine rows: that table's key holds no partition column), the count pass is skipped, and so is
        the cache unless two tables are left to write: the parse runs once, inside the one write.
    """
    spark = files.sparkSession
    parsed = module.transform(files, job)
    route = route_column(targets)
    aggregates, prune = [], []
    for i, target in enumerate(targets):
        aggregates.append(F.count_if(route == target.name).alias(f"rows{i}"))
        for column in target.prune_by:
            if column in parsed.columns:
                prune.append((target.name, column, f"values{len(prune)}"))
                aggregates.append(F.collect_set(F.when(route == target.name, F.col(column))).alias(prune[-1][2]))
    left = [t.name for t in targets if t.name not in done and (counted is None or counted.get(t.name))]
    bounded = {table for table, _, _ in prune}
    if counted is not None and not bounded.intersection(left):
        stats = {f"rows{i}": counted.get(t.name, 0) for i, t in enumerate(targets)}
    else:
        stats = None
    if stats is None or len(left) > 1:
        parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if stats is None:
            with job_step(spark, STEP_PARSE):
                stats = parsed.agg(*aggregates).first()
        result = CachedWrite()
        for i, target in enumerate(targets):
            batch_rows = stats[f"rows{i}"]
            result.carried[target.name] = batch_rows
            if target.name in done or not batch_rows:
                result.rows[target.name] = 0
                continue
            values = {column: stats[alias] for table, column, alias in prune if table == target.name}
            with job_step(spark, f"{STEP_WRITE}{target.name}"):
                result.rows[target.name] = writer.write(batch_id, target.name, table_rows(module, target, parsed),
                                                        values, rows=batch_rows, rest=target.name == rest_table)
    finally:
        parsed.unpersist()
    return result


def count_files(files: DataFrame) -> int:
    """The batch's input files (one row each in Spark's ``binaryFile`` source)."""
    with job_step(files.sparkSession, STEP_COUNT):
        return files.count()
