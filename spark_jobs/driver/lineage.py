"""A driver's OpenLineage run: what this Spark run reads and writes, and the Airflow task run that submitted it.

The openlineage-spark listener cannot tell this: the raw tables are written by a staged insert through Delta's
transaction API and the others by a MERGE inside ``foreachBatch``, and a streaming query is reported as a
START/COMPLETE pair per micro-batch. So the driver reports its run itself (:mod:`spark_jobs.control.lineage`):
one run per streaming query, its inputs (the landing folder or bucket, the SQS queue, the Kafka topics, the Delta
table a job reads), every Delta table it writes, the rows each micro-batch wrote and the files it read, and as its
parent the Airflow task run named by the ``spark.openlineage.parent*`` settings the submit carried
(:meth:`spark_jobs.launch.submit.Submission.with_lineage_parent`).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from spark_jobs.control.lineage.emitter import LineageEmitter, describe_destination
from spark_jobs.control.lineage.events import Parent, RunDescription
from spark_jobs.control.lineage.naming import (DatasetName, job_namespace, kafka_datasets, path_dataset,
                                               sqs_dataset)
from spark_jobs.control.lineage.run import RunLineage, interval_seconds
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.streams import KafkaSource

log = logging.getLogger("spark_jobs.lineage")


def inputs_of(job: JobSpec, options: RunOptions) -> list[DatasetName]:
    """What a run of ``job`` reads, as datasets."""
    if isinstance(job.source, KafkaSource):
        from spark_jobs.model.kafka_connection import KafkaConnection

        servers = KafkaConnection.from_airflow(job.source.connection_id).bootstrap_servers
        return kafka_datasets(servers, str(options.input_path))
    datasets = [path_dataset(options.input_path)]
    if options.queue_url:
        datasets.append(sqs_dataset(options.queue_url))
    return datasets


def outputs_of(job: JobSpec, options: RunOptions) -> dict[str, DatasetName]:
    return {table.name: path_dataset(options.lake.table_path(table.name)) for table in job.tables}


def parent_of(spark) -> Parent | None:
    """The Airflow task run the submit named (the ``spark.openlineage.parent*`` settings), if any."""
    return Parent.from_conf({key: spark.conf.get(key, None) for key in Parent.CONF.values()})


def start(job: JobSpec, options: RunOptions, spark, interval: float) -> RunLineage | None:
    """The streaming run's lineage, its ``START`` sent; None when lineage is off or cannot be set up (a log line:
    the run goes on).

    :param interval: seconds between two ``RUNNING`` events at least (:func:`interval_seconds`, checked before the
        query starts).
    """
    return _start(job.name, options.lake.root, interval, lambda run_id: RunDescription(
        job_namespace(), job.name, run_id, streaming=not options.trigger.available_now, inputs=inputs_of(job, options),
        outputs=outputs_of(job, options), stream=options.stream_name(job.name), trigger=options.trigger.spec,
        checkpoint=str(options.checkpoint_path(job.name)), parent=parent_of(spark), engine_version=spark.version))


def _start(job_name: str, lake_root, interval: float, describe: Callable[[str], RunDescription]) -> RunLineage | None:
    try:
        emitter = LineageEmitter.from_settings(lake_root)
        if emitter is None:
            return None
        from openlineage.client.uuid import generate_new_uuid

        run = describe(str(generate_new_uuid()))
        lineage = RunLineage(emitter, run, interval)
        lineage.start()
    except Exception as error:  # noqa: BLE001 - lineage never fails a run
        log.warning("lineage: not reported for this run of %s: %s", job_name, error)
        return None
    parent = run.parent
    log.info("lineage: run %s of %s (parent %s) -> %s", run.run_id, job_name,
             f"{parent.name} run {parent.run_id}" if parent else "none", describe_destination(lake_root))
    return lineage


@contextmanager
def reported(job: JobSpec, options: RunOptions, spark, aborted: Callable[[], bool],
             interval: float) -> Iterator[RunLineage | None]:
    """The run's lineage around the body that awaits its query: ``COMPLETE`` when the body returns, ``ABORT`` when
    ``aborted()`` (this driver lost its lease) or a signal or exit ends it, else ``FAIL`` with the error's first
    line; then a bounded wait for the last events."""
    with _ended(start(job, options, spark, interval), aborted) as lineage:
        yield lineage


@contextmanager
def reported_reprocess(job: JobSpec, lake: Lake, source, spark) -> Iterator[RunLineage | None]:
    """A reprocess as one run (stream ``<job>@reprocess``, ``BATCH``): its replayed folder in, every table out; the
    body adds the files and rows (:meth:`RunLineage.batch`)."""
    lineage = _start(job.name, lake.root, interval_seconds(), lambda run_id: RunDescription(
        job_namespace(), job.name, run_id, streaming=False, inputs=[path_dataset(source)],
        outputs={table.name: path_dataset(lake.table_path(table.name)) for table in job.tables},
        stream=f"{job.name}@reprocess", trigger="reprocess", checkpoint="", parent=parent_of(spark),
        engine_version=spark.version))
    with _ended(lineage, lambda: False) as lineage:
        yield lineage


@contextmanager
def _ended(lineage: RunLineage | None, aborted: Callable[[], bool]) -> Iterator[RunLineage | None]:
    from openlineage.client.event_v2 import RunState

    try:
        yield lineage
    except BaseException as error:
        if lineage is not None:
            if aborted() or isinstance(error, (KeyboardInterrupt, SystemExit)):
                lineage.finish(RunState.ABORT, str(error).splitlines()[0] if str(error) else type(error).__name__)
            else:
                lineage.finish(RunState.FAIL, (str(error).splitlines() or [type(error).__name__])[0][:2000])
            lineage.emitter.close()
        raise
    if lineage is not None:
        lineage.finish(RunState.COMPLETE)
        lineage.emitter.close()
