"""The jobs: one module per registry entry (``spark_jobs.jobs.<job name>``), each of the shape :class:`JobModule`.

A job is its registry entry (:mod:`spark_jobs.registry`: source, tables with their keys, routes,
bounds and schemas, triggers) and its module here, which holds only the pure Spark code::

    def transform(source: DataFrame, job: JobSpec) -> DataFrame:
        '''The job's rows of its source (files, messages, a table), streaming or batch.'''

    def events(result: DataFrame, context: BatchContext | None) -> DataFrame:
        '''One table's columns of the result's rows the table's route took.'''

    OUTPUTS = {"events": events, ...}   # one select per registry table, in the registry's order

Stateless and stateful jobs have this one shape. A stateless job's ``transform`` runs inside each
micro-batch; each table's ``route`` (registry) picks its rows of the result and its select gets
``context=None``. A stateful job's ``transform`` runs on the stream (its state lives in the
checkpoint) and each select gets the batch's
:class:`~spark_jobs.driver.job_contract.BatchContext` (watermark, batch time, dimensions, settings,
the batch's source rows). The driver conforms a select's rows to its table's declared ``schema`` and
writes the tables (:mod:`spark_jobs.driver.write`). Of the driver, a job module imports only
:mod:`spark_jobs.driver.job_contract`; its building blocks (``conformed``, ``enrich``, windows, parsers)
are in :mod:`spark_jobs.transforms`.
"""

from spark_jobs.driver.job_contract import BatchContext, JobModule, Select

__all__ = ["BatchContext", "JobModule", "Select"]
