"""The OpenLineage run events of one Spark run of a job, built with the OpenLineage client's own classes.

A run event (``START``, ``RUNNING``, ``COMPLETE``, ``FAIL``, ``ABORT``) carries:

- the job: namespace and name (:mod:`.naming`), its ``jobType`` facet (``STREAMING`` for a processing-time run,
  ``BATCH`` for an available-now one; integration ``SPARK``);
- the run: its id, its ``parent`` facet (the Airflow task run that spark-submitted it, and the DAG run as the root,
  when the submit carried them: :class:`Parent`), ``processing_engine`` (Spark and its version), ``errorMessage`` on
  a failure, and the project's own ``spark_jobs`` facet (:class:`SparkJobsRunFacet`: the stream, trigger,
  checkpoint, micro-batches, files read and rows written per table, in all and since the run's previous event);
- the inputs (the landing folder or bucket, the Kafka topics, the SQS queue; ``inputStatistics`` with the files
  read), and the outputs: every Delta table the job writes, with ``storage`` (delta, parquet) and
  ``outputStatistics`` (the rows written by the run so far).

The project's facet is described by a JSON schema shipped beside this module (:data:`FACET_SCHEMA_FILE`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Mapping

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    storage_dataset,
)
from openlineage.client.generated.base import RunFacet

from spark_jobs.control.lineage.naming import DatasetName

PRODUCER = "urn:spark_jobs:lineage"
FACET_NAME = "spark_jobs"
FACET_SCHEMA_URL = "urn:spark_jobs:lineage:facets:1-0-0:SparkJobsRunFacet.json#/$defs/SparkJobsRunFacet"
FACET_SCHEMA_FILE = Path(__file__).resolve().parent / "SparkJobsRunFacet.json"


@attr.define
class SparkJobsRunFacet(RunFacet):
    """The project's own run facet: what a Spark run of a job did so far, and since its previous event.

    :param stream: the stream's name (the job's, or ``<job>@<writer>`` for a backfill's writer).
    :param trigger: the run's trigger (``available-now``, ``processing-time:10s``).
    :param checkpoint: the stream's checkpoint.
    :param batches: micro-batches committed by this run.
    :param inputFiles: files those batches read.
    :param rows: rows written per table.
    :param sinceLastEvent: the same three counts since the run's previous event (a ``RUNNING`` event's window).
    """

    stream: str
    trigger: str
    checkpoint: str
    batches: int = 0
    inputFiles: int = 0  # noqa: N815 - OpenLineage's camelCase
    rows: dict[str, int] = attr.field(factory=dict)
    sinceLastEvent: dict = attr.field(factory=dict)  # noqa: N815
    _additional_skip_redact: ClassVar[list[str]] = ["stream", "trigger", "checkpoint", "rows"]

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA_URL


@dataclass(frozen=True)
class Parent:
    """The run that started this one (the Airflow task run) and its root (the DAG run), as the submit passed them
    (the ``spark.openlineage.parent*`` and ``rootParent*`` settings the Airflow provider injects)."""

    namespace: str
    name: str
    run_id: str
    root_namespace: str | None = None
    root_name: str | None = None
    root_run_id: str | None = None

    # The Spark settings (also the openlineage-spark listener's) that carry each field.
    CONF: ClassVar[dict[str, str]] = {
        "namespace": "spark.openlineage.parentJobNamespace", "name": "spark.openlineage.parentJobName",
        "run_id": "spark.openlineage.parentRunId", "root_namespace": "spark.openlineage.rootParentJobNamespace",
        "root_name": "spark.openlineage.rootParentJobName", "root_run_id": "spark.openlineage.rootParentRunId"}

    @classmethod
    def from_conf(cls, conf: Mapping[str, str]) -> "Parent | None":
        """The parent in ``conf`` (Spark settings), or None when the run has none (started by hand)."""
        values = {key: conf.get(setting) or None for key, setting in cls.CONF.items()}
        if not (values["namespace"] and values["name"] and values["run_id"]):
            return None
        return cls(**values)

    def to_conf(self) -> dict[str, str]:
        return {setting: getattr(self, key) for key, setting in self.CONF.items() if getattr(self, key)}

    def facet(self) -> parent_run.ParentRunFacet:
        root = None
        if self.root_namespace and self.root_name and self.root_run_id:
            root = parent_run.Root(run=parent_run.RootRun(runId=self.root_run_id),
                                   job=parent_run.RootJob(namespace=self.root_namespace, name=self.root_name))
        return parent_run.ParentRunFacet(run=parent_run.Run(runId=self.run_id),
                                         job=parent_run.Job(namespace=self.namespace, name=self.name), root=root,
                                         producer=PRODUCER)


@dataclass
class RunDescription:
    """What stays the same across one run's events.

    :param job_namespace: the job's namespace.
    :param job_name: the registry entry's name.
    :param run_id: this run's id (a UUIDv7).
    :param streaming: a processing-time run (``STREAMING``), else ``BATCH``.
    :param inputs: what it reads.
    :param outputs: the Delta tables it writes, by table name.
    :param stream: the stream's name.
    :param trigger: the trigger's spec.
    :param checkpoint: the checkpoint's path.
    :param parent: the Airflow task run that submitted it, if any.
    :param engine_version: the Spark version.
    """

    job_namespace: str
    job_name: str
    run_id: str
    streaming: bool
    inputs: list[DatasetName]
    outputs: dict[str, DatasetName]
    stream: str
    trigger: str
    checkpoint: str
    parent: Parent | None = None
    engine_version: str = ""


@dataclass
class Counts:
    """Micro-batches, files read and rows written per table."""

    batches: int = 0
    input_files: int = 0
    rows: dict[str, int] = field(default_factory=dict)

    def add(self, files: int, rows: Mapping[str, int]) -> None:
        self.batches += 1
        self.input_files += files
        for table, count in rows.items():
            self.rows[table] = self.rows.get(table, 0) + count

    def as_facet_fields(self) -> dict:
        return {"batches": self.batches, "inputFiles": self.input_files, "rows": dict(sorted(self.rows.items()))}


def run_event(run: RunDescription, state: RunState, total: Counts, window: Counts,
              error: str | None = None, when: dt.datetime | None = None) -> RunEvent:
    """One event of ``run`` in ``state``, with the counts of the whole run (``total``) and since its previous
    event (``window``)."""
    facets: dict = {
        FACET_NAME: SparkJobsRunFacet(stream=run.stream, trigger=run.trigger, checkpoint=run.checkpoint,
                                      sinceLastEvent=window.as_facet_fields(), producer=PRODUCER,
                                      **total.as_facet_fields()),
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(version=run.engine_version or "unknown",
                                                                            name="spark", producer=PRODUCER),
    }
    if run.parent is not None:
        facets["parent"] = run.parent.facet()
    if error:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=error, programmingLanguage="python",
                                                                       producer=PRODUCER)
    job_type = job_type_job.JobTypeJobFacet(processingType="STREAMING" if run.streaming else "BATCH",
                                            integration="SPARK", jobType="JOB", producer=PRODUCER)
    inputs = [InputDataset(namespace=d.namespace, name=d.name, inputFacets={
        "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            fileCount=total.input_files, producer=PRODUCER)}) for d in run.inputs]
    outputs = [OutputDataset(namespace=d.namespace, name=d.name,
                             facets={"storage": storage_dataset.StorageDatasetFacet(
                                 storageLayer="delta", fileFormat="parquet", producer=PRODUCER)},
                             outputFacets={"outputStatistics": output_statistics_output_dataset.
                                           OutputStatisticsOutputDatasetFacet(rowCount=total.rows.get(table, 0),
                                                                              producer=PRODUCER)})
               for table, d in sorted(run.outputs.items())]
    moment = when or dt.datetime.now(dt.timezone.utc)
    return RunEvent(eventType=state, eventTime=moment.isoformat(), producer=PRODUCER,
                    run=Run(runId=run.run_id, facets=facets),
                    job=Job(namespace=run.job_namespace, name=run.job_name, facets={"jobType": job_type}),
                    inputs=inputs, outputs=outputs)
