"""Write one micro-batch to a job's tables, exactly once, by one of three named plans.

- ``stateful``: a micro-batch of a stateful job's result (:mod:`spark_jobs.driver.write.stateful`);
- ``pipelined``: a file batch whose files' names bound its event dates, written in one pass
  (:mod:`spark_jobs.driver.write.pipelined`); what that pass leaves (quarantine rows, rows outside the
  bound) is written the cached way under the writer's ``:rest`` series;
- ``cached``: any other stateless batch, parsed once into the batch's cache and written from it
  (:mod:`spark_jobs.driver.write.cached`): a batch with an undated file, a job without a delivery-date
  bound, a batch the bounded table holds already (one run again after a crash).

Every commit goes through :class:`~spark_jobs.driver.write.delta_writer.ExactlyOnceWriter`. The plan a batch
took is logged and named in its Spark jobs' descriptions (the Spark UI).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.jobs import JobSpec
from spark_jobs.driver.session import job_step, session_conf
from spark_jobs.driver.write.cached import count_files, write_cached
from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, TableTarget
from spark_jobs.driver.write.pipelined import plan_pipelined, rest_table, write_pipelined
from spark_jobs.driver.write.stateful import StatefulBatchWriter

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import JobModule

log = logging.getLogger("spark_jobs")

PIPELINED, CACHED, STATEFUL = "pipelined", "cached", "stateful"
PLANS = (PIPELINED, CACHED, STATEFUL)
# A pipelined batch of at most this many files runs with Spark's expressions interpreted (INTERPRETED): compiling
# a Java class per plan (whole-stage code generation, then Janino) costs a cold driver seconds that a few
# thousand rows never pay back (bench --only cold_start); larger batches keep the generated code.
SMALL_BATCH_FILES = 16
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@dataclass
class BatchWritten:
    """What :func:`write_batch` did.

    :param plan: the plan the batch took (one of :data:`PLANS`).
    :param inputs: the batch's input files (a stateful job: its input rows when the job can tell, else ``None``).
    :param rows: rows inserted per table (0 for a table that already held this batch, and for rows whose key
        the table already held; updated rows too, for an upsert).
    :param carried: rows the batch carried per table, before deduplication (a stateful job: the rows of its
        result it wrote).
    """

    plan: str
    inputs: int | None
    rows: dict[str, int] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)


def write_batch(frame: DataFrame, batch_id: int, *, job: JobSpec, module: JobModule, writer: ExactlyOnceWriter,
                targets: list[TableTarget], stateful: StatefulBatchWriter | None = None,
                files: list[str] | None = None) -> BatchWritten:
    """Write micro-batch ``batch_id`` to every table: each table gets one Delta commit (two, at most, for the
    table the pipelined pass bounds).

    :param frame: the batch: the source's rows (files, messages), or a micro-batch of a stateful job's result.
    :param job: the registry entry; ``module`` its job module (:class:`~spark_jobs.jobs.JobModule`).
    :param stateful: the writer of a stateful job's result; ``None`` for a stateless job.
    :param files: the batch's input files when the source knows them without reading the batch (the landing
        source's manifests); ``None``: a file batch's paths are read from ``frame``.
    """
    spark = frame.sparkSession
    pipelined = None if stateful is not None else plan_pipelined(writer, targets, frame, batch_id, paths=files, job=job)
    plan = STATEFUL if stateful is not None else PIPELINED if pipelined is not None else CACHED
    log.info("batch %d: plan %s", batch_id, plan)
    small = pipelined is not None and len(pipelined.paths) <= SMALL_BATCH_FILES
    with job_step(spark, f"plan {plan}"), session_conf(spark, INTERPRETED if small else {}):
        if stateful is not None:
            inputs, rows = stateful.write(frame, batch_id)
            return BatchWritten(plan, inputs, rows, dict(rows))
        if pipelined is None:
            rest = rest_table(writer, targets, frame, batch_id)
            written = write_cached(module, job, writer, targets, frame, batch_id, rest_table=rest)
            return BatchWritten(plan, len(files) if files is not None else count_files(frame), written.rows,
                                written.carried)
        first = write_pipelined(module, job, writer, targets, frame, batch_id, pipelined)
        if first.complete:
            return BatchWritten(plan, first.files, first.rows, dict(first.carried))
        if first.rest_files is not None:  # only the files with rows the one pass left
            frame = frame.where(F.col("path").isin(first.rest_files))
        rest = write_cached(module, job, writer, targets, frame, batch_id, rest_table=first.table,
                            done=first.done, counted=first.carried)
        rows = {table: rest.rows[table] + first.rows.get(table, 0) for table in rest.rows}
        return BatchWritten(plan, first.files, rows, dict(first.carried or rest.carried))
