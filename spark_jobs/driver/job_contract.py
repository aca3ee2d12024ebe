"""What the driver expects of a job module, and what it hands a stateful job's selects.

:class:`JobModule` is the one shape of every module in :mod:`spark_jobs.jobs` (stateless and stateful); the
driver loads it by name (:func:`spark_jobs.driver.job_modules.job_module`) and writes what its selects return
(:mod:`spark_jobs.driver.write`), each conformed to its table's declared schema, if any. :class:`BatchContext` is
what a stateful job's selects get for each micro-batch. This module is the one part of the driver a job module
imports (``.importlinter``); its building blocks are in :mod:`spark_jobs.transforms`. See :mod:`spark_jobs.jobs`
for a job module's shape in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Mapping, Optional, Protocol, runtime_checkable

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.model.jobs import JobSpec


@dataclass
class BatchContext:
    """What one micro-batch's rows may use besides its input (see the module docstring).

    :param spark: the batch's session.
    :param job: the registry entry (its windows, watermark, dimensions).
    :param batch_id: the micro-batch, ``None`` in batch mode.
    :param late_watermark_ms: the watermark late input is dropped by in this batch; ``None`` in batch
        mode (no watermark: nothing is late).
    :param batch_time: when the batch was planned (UTC).
    :param dimensions: each dimension's rows as a DataFrame, by name.
    :param settings: the job's settings.
    :param source_batch: a function returning the micro-batch's input rows (a Delta source; else ``None``).
    """

    spark: SparkSession
    job: JobSpec
    batch_id: int | None
    late_watermark_ms: int | None
    batch_time: datetime
    dimensions: dict[str, DataFrame] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    source_batch: object = None  # () -> DataFrame: the rows the batch read from its Delta source (see above)


# A table's select: its columns of the transform's result (``context`` is None for a stateless job).
Select = Callable[[DataFrame, "Optional[BatchContext]"], DataFrame]


@runtime_checkable
class JobModule(Protocol):
    """The shape of a job module (see the module docstring).

    :ivar OUTPUTS: one select per table of the job's registry entry, in the registry's order. A file log type's
        module holds only ``transform``: the driver derives its two selects from its registry entry
        (:func:`spark_jobs.driver.job_modules.job_module`).
    """

    OUTPUTS: Mapping[str, Select]

    def transform(self, source: DataFrame, job: JobSpec) -> DataFrame:
        """The job's rows of ``source`` (stateless: one result for all tables; stateful: the stream's result)."""
        ...
